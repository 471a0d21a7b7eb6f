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

/// A fresh id: a UUID version 7 (RFC 9562), e.g. `019a4f2e-8c1d-7b3a-9f12-3c4d5e6f7a8b`: 48 bits
/// of Unix time in milliseconds, then the version, 74 random bits and the variant, so ids
/// sort by creation time (to the millisecond) and two made in the same millisecond still
/// differ. Sessions made by earlier versions keep their `YYYYMMDDTHHMMSS-xxxxxx` ids.
pub(super) fn new_id(now: jiff::Timestamp) -> String {
    uuid_v7(now)
}

/// A UUID version 7 for `now`, in its lowercase hyphenated text form.
pub(super) fn uuid_v7(now: jiff::Timestamp) -> String {
    // Before 1970 is not a time any session starts at; it counts as 0.
    let millis = u64::try_from(now.as_millisecond()).unwrap_or(0) & 0xffff_ffff_ffff;
    let high = random_u64(now);
    let low = random_u64(now);
    // 48 bits of time, 4 bits of version (7), 12 random bits.
    let upper = (millis << 16) | 0x7000 | (high & 0x0fff);
    // 2 bits of variant (0b10), 62 random bits.
    let lower = (low & 0x3fff_ffff_ffff_ffff) | 0x8000_0000_0000_0000;
    format!(
        "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
        upper >> 32,
        (upper >> 16) & 0xffff,
        upper & 0xffff,
        lower >> 48,
        lower & 0xffff_ffff_ffff
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
            "019aa1b2-c3d4-7e5f-8a6b-7c8d9e0f1a2b",
            "a",
            "my_session.v2",
            "a.b.c",
            &"x".repeat(MAX_ID_LEN),
        ] {
            assert!(validate_id(good).is_ok(), "{good:?} refused");
        }
    }

    #[test]
    fn new_ids_are_uuid_v7_in_time_order() {
        let at = |ms: i64| jiff::Timestamp::from_millisecond(ms).unwrap();
        let id = new_id(at(1_764_000_000_123));
        assert!(validate_id(&id).is_ok(), "{id}");
        let parts: Vec<&str> = id.split('-').collect();
        assert_eq!(
            parts.iter().map(|p| p.len()).collect::<Vec<_>>(),
            [8, 4, 4, 4, 12],
            "{id}"
        );
        assert!(
            id.bytes()
                .all(|b| b == b'-' || matches!(b, b'0'..=b'9' | b'a'..=b'f'))
        );
        // The first 48 bits are the time in milliseconds.
        let millis = u64::from_str_radix(&format!("{}{}", parts[0], parts[1]), 16).unwrap();
        assert_eq!(millis, 1_764_000_000_123);
        assert!(parts[2].starts_with('7'), "version 7: {id}");
        assert!(
            matches!(&parts[3][..1], "8" | "9" | "a" | "b"),
            "variant: {id}"
        );
        // Later ids sort after earlier ones; ids of the same millisecond differ.
        assert!(new_id(at(1_764_000_000_124)) > id);
        assert_ne!(new_id(at(1_764_000_000_123)), id);
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
