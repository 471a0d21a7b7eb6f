//! Session ids: generation and validation.

use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};

use super::SessionError;

/// The longest session id accepted, in bytes.
pub(super) const MAX_ID_LEN: usize = 128;

/// Checks that `id` can name a session file: 1 to 128 ASCII letters, digits, `-`, `_` or
/// `.`, not starting with `.` and without `..`.
///
/// This rules out `/`, `..`, NUL, whitespace and hidden files, so no id can name a path
/// outside the session directory.
pub fn validate_id(id: &str) -> Result<(), SessionError> {
    let ok = !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && !id.contains("..")
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
    if ok {
        Ok(())
    } else {
        Err(SessionError::InvalidId {
            id: id.chars().take(MAX_ID_LEN + 16).collect(),
        })
    }
}

/// A fresh id: `YYYYMMDDTHHMMSS-xxxxxx` (UTC, six random hex digits).
pub(super) fn new_id(now: jiff::Timestamp) -> String {
    format!(
        "{}-{:06x}",
        now.strftime("%Y%m%dT%H%M%S"),
        random_u64(now) & 0xff_ffff
    )
}

/// Random bits from the OS, or, if `/dev/urandom` cannot be read, a mix of the time, the
/// process id and a per-process counter (unique within the process, unpredictable enough
/// across processes).
fn random_u64(now: jiff::Timestamp) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut buf = [0_u8; 8];
    let os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut buf));
    let seed = match os {
        Ok(()) => u64::from_le_bytes(buf),
        Err(_) => {
            // Truncating the nanosecond count is fine: only its low bits vary.
            let nanos = now.as_nanosecond() as u64;
            nanos ^ (u64::from(std::process::id()) << 32)
        }
    };
    splitmix64(seed ^ count.wrapping_mul(0x9E37_79B9_7F4A_7C15))
}

fn splitmix64(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_paths_and_odd_characters() {
        for bad in [
            "",
            "..",
            ".",
            "../x",
            "a/b",
            "/etc/passwd",
            "../../etc/passwd",
            ".hidden",
            "a b",
            "a\tb",
            "a\nb",
            "a\0b",
            "a\\b",
            "a..b",
            "é",
            &"x".repeat(MAX_ID_LEN + 1),
        ] {
            assert!(
                matches!(validate_id(bad), Err(SessionError::InvalidId { .. })),
                "{bad:?} accepted"
            );
        }
    }

    #[test]
    fn accepts_generated_and_plain_ids() {
        for good in [
            "20261122T062604-3f9a1c",
            "a",
            "my_session.v2",
            "a.b.c",
            &"x".repeat(MAX_ID_LEN),
        ] {
            assert!(validate_id(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn invalid_id_error_is_bounded() {
        let long = "/".repeat(10_000);
        let err = validate_id(&long);
        assert!(
            matches!(&err, Err(SessionError::InvalidId { id }) if id.len() <= MAX_ID_LEN + 16),
            "{err:?}"
        );
    }
}
