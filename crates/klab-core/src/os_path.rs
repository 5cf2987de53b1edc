//! Paths in JSON byte for byte, for `#[serde(with = "klab_core::os_path")]` (and
//! `os_path::option` on an `Option<PathBuf>`): a UTF-8 path is a string, any other path its
//! bytes as an array of numbers. serde's own `PathBuf` refuses a path that is not UTF-8,
//! and a Unix path may be any bytes.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Deserialize)]
#[serde(untagged)]
enum Form {
    Text(String),
    Bytes(Vec<u8>),
}

pub fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
    match p.to_str() {
        Some(text) => s.serialize_str(text),
        None => p.as_os_str().as_bytes().serialize(s),
    }
}

pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
    Ok(match Form::deserialize(d)? {
        Form::Text(t) => PathBuf::from(t),
        Form::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
    })
}

/// The same for an optional path (`null` when absent).
pub mod option {
    use super::*;

    pub fn serialize<S: Serializer>(p: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => super::serialize(p, s),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<PathBuf>, D::Error> {
        Ok(Option::<Form>::deserialize(d)?.map(|f| match f {
            Form::Text(t) => PathBuf::from(t),
            Form::Bytes(b) => PathBuf::from(OsString::from_vec(b)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Paths {
        #[serde(with = "super")]
        one: PathBuf,
        #[serde(with = "super::option")]
        maybe: Option<PathBuf>,
    }

    #[test]
    fn a_path_that_is_not_utf8_comes_back_byte_for_byte() {
        let odd = PathBuf::from(std::ffi::OsStr::from_bytes(b"/tmp/nv\xff9"));
        for v in [
            Paths {
                one: "/a b/c".into(),
                maybe: None,
            },
            Paths {
                one: odd.clone(),
                maybe: Some(odd.clone()),
            },
        ] {
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(serde_json::from_str::<Paths>(&json).unwrap(), v, "{json}");
        }
        let json = serde_json::to_string(&Paths {
            one: "/x".into(),
            maybe: Some("y".into()),
        })
        .unwrap();
        assert_eq!(json, r#"{"one":"/x","maybe":"y"}"#);
    }
}
