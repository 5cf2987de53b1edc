//! klab-evidence: what klab writes down and how it is checked.
//!
//! A [`receipt`] binds a timing run to the bytes it measured, and its [`schema`] says
//! what each artifact holds; [`compare`] validates two receipts before it computes a
//! speedup. [`sweep`] and [`row`] are curves over sizes and the summary rows commands
//! print; [`sanitize`] is `sanitize.json`, what Compute Sanitizer found.

pub mod compare;
pub mod receipt;
pub mod row;
pub mod sanitize;
pub mod schema;
pub mod sweep;
