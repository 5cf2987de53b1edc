//! klab report (placeholder until the report module lands).
