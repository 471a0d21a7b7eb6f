//! When and how long to wait before trying a failed request again.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// How failed requests are retried.
///
/// Retried: HTTP 408, 409, 429, 5xx (529 included), connection failures, idle timeouts and
/// streams cut before any content arrived. A server's `x-should-retry: true|false` overrides
/// the status. The wait is the server's `retry-after-ms` or `retry-after` when it gave one above
/// zero, clamped to [`max_server_wait`](Self::max_server_wait) (so `retry-after: 1e30` waits
/// that long, not forever), else exponential backoff from `initial_backoff`, doubling up to
/// `max_backoff`, less up to 25 % jitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 4).
    pub max_retries: u32,
    /// The first backoff (default 0.5 s).
    pub initial_backoff: Duration,
    /// The longest backoff (default 8 s).
    pub max_backoff: Duration,
    /// The longest server-requested wait honoured (default 60 s); a longer one is cut to this.
    pub max_server_wait: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_server_wait: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// A policy that never retries.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            ..Self::default()
        }
    }

    /// Sets the number of retries.
    pub fn with_max_retries(mut self, max_retries: u32) -> Self {
        self.max_retries = max_retries;
        self
    }

    /// Sets the backoff range.
    pub fn with_backoff(mut self, initial: Duration, max: Duration) -> Self {
        self.initial_backoff = initial;
        self.max_backoff = max;
        self
    }

    /// The wait before retry number `retry` (0 for the first), given the server's request.
    ///
    /// A server's wait, however large, is clamped to
    /// [`max_server_wait`](Self::max_server_wait); none (or zero) means backoff. Never
    /// panics or overflows, for any `retry` and any durations in the policy.
    pub fn wait(&self, retry: u32, server_wait: Option<Duration>) -> Duration {
        self.wait_jittered(retry, server_wait, fastrand::f64())
    }

    /// [`wait`](Self::wait) with the jitter drawn: `jitter` in `0.0..=1.0` takes that share
    /// of 25 % off the backoff.
    fn wait_jittered(&self, retry: u32, server_wait: Option<Duration>, jitter: f64) -> Duration {
        if let Some(wait) = server_wait
            && !wait.is_zero()
        {
            return wait.min(self.max_server_wait);
        }
        let factor = 2u32.saturating_pow(retry.min(30));
        let backoff = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        // Less up to 25 %: a quarter of any duration fits in one, so this cannot overflow.
        let jitter = Duration::try_from_secs_f64(backoff.as_secs_f64() * 0.25 * jitter)
            .unwrap_or(Duration::ZERO);
        backoff.saturating_sub(jitter)
    }
}

/// Whether an HTTP failure may be retried: `x-should-retry` first, then the status.
pub(crate) fn status_is_retryable(status: StatusCode, headers: &HeaderMap) -> bool {
    match header_str(headers, "x-should-retry") {
        Some("true") => return true,
        Some("false") => return false,
        _ => {}
    }
    matches!(status.as_u16(), 408 | 409 | 429) || status.is_server_error()
}

/// The wait the server asked for: `retry-after-ms`, else `retry-after` in seconds or as an
/// HTTP date. Any value is accepted without panicking: huge or infinite ones saturate at
/// [`Duration::MAX`] (the policy then clamps them), dates in the past are zero, negative or
/// NaN values and text that is neither are ignored.
pub(crate) fn server_wait(headers: &HeaderMap) -> Option<Duration> {
    if let Some(wait) = header_str(headers, "retry-after-ms")
        .and_then(|v| v.parse::<f64>().ok())
        .and_then(|ms| saturating_secs(ms / 1000.0))
    {
        return Some(wait);
    }
    let value = header_str(headers, "retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return saturating_secs(secs);
    }
    let date = httpdate_seconds(value)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    let ahead = date.saturating_sub(i128::from(now)).max(0);
    Some(Duration::from_secs(
        u64::try_from(ahead).unwrap_or(u64::MAX),
    ))
}

/// `secs` as a duration: `None` when negative or NaN, [`Duration::MAX`] when too large.
fn saturating_secs(secs: f64) -> Option<Duration> {
    if secs.is_nan() || secs < 0.0 {
        return None;
    }
    // Negative zero passes the check above and is zero; +inf and 1e300 saturate.
    Some(Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX))
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), negative
/// before 1970. Out-of-range fields are refused; any year is computed without overflow.
fn httpdate_seconds(value: &str) -> Option<i128> {
    let mut parts = value.split_whitespace().skip(1);
    let day: i128 = parts.next()?.parse().ok()?;
    let month: i128 = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    // i64 keeps every step below in i128's range.
    let year = i128::from(parts.next()?.parse::<i64>().ok()?);
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<i128>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    if !(1..=31).contains(&day)
        || !(0..24).contains(&h)
        || !(0..60).contains(&m)
        || !(0..=60).contains(&s)
    {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + m * 60 + s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (k, v) in pairs {
            map.insert(*k, HeaderValue::from_static(v));
        }
        map
    }

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter() {
        let policy = RetryPolicy::default();
        for (retry, nominal) in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)] {
            let wait = policy.wait(retry, None).as_secs_f64();
            assert!(
                wait <= nominal && wait >= nominal * 0.75,
                "retry {retry}: {wait}"
            );
        }
    }

    #[test]
    fn server_waits_are_honoured_up_to_the_limit() {
        let policy = RetryPolicy::default();
        assert_eq!(
            policy.wait(0, Some(Duration::from_secs(3))),
            Duration::from_secs(3)
        );
        assert_eq!(
            policy.wait(0, Some(Duration::from_secs(61))),
            Duration::from_secs(60)
        );
        assert_eq!(policy.wait(0, Some(Duration::MAX)), Duration::from_secs(60));
        assert!(policy.wait(0, Some(Duration::ZERO)) <= Duration::from_millis(500));
    }

    #[test]
    fn retry_after_headers_are_read() {
        assert_eq!(
            server_wait(&headers(&[
                ("retry-after-ms", "1500"),
                ("retry-after", "9")
            ])),
            Some(Duration::from_millis(1500))
        );
        assert_eq!(
            server_wait(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            server_wait(&headers(&[(
                "retry-after",
                "Sun, 06 Nov 1994 08:49:37 GMT"
            )])),
            Some(Duration::ZERO)
        );
        assert_eq!(
            httpdate_seconds("Sun, 06 Nov 1994 08:49:37 GMT"),
            Some(784_111_777)
        );
        assert_eq!(httpdate_seconds("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(httpdate_seconds("Wed, 31 Dec 1969 23:59:59 GMT"), Some(-1));
        assert_eq!(server_wait(&headers(&[("retry-after", "soon")])), None);
    }

    #[test]
    fn should_retry_header_overrides_the_status() {
        let none = HeaderMap::new();
        for status in [408, 409, 429, 500, 502, 503, 529] {
            assert!(status_is_retryable(
                StatusCode::from_u16(status).unwrap(),
                &none
            ));
        }
        for status in [400, 401, 403, 404, 413, 422] {
            assert!(!status_is_retryable(
                StatusCode::from_u16(status).unwrap(),
                &none
            ));
        }
        assert!(!status_is_retryable(
            StatusCode::from_u16(529).unwrap(),
            &headers(&[("x-should-retry", "false")])
        ));
        assert!(status_is_retryable(
            StatusCode::from_u16(400).unwrap(),
            &headers(&[("x-should-retry", "true")])
        ));
    }

    /// Every adversarial value below, and random ones, parse without panicking to a wait
    /// that the default policy then keeps within its limit.
    fn check(name: &'static str, value: &[u8]) -> Option<Duration> {
        let mut map = HeaderMap::new();
        let Ok(value) = HeaderValue::from_bytes(value) else {
            return None;
        };
        map.insert(name, value);
        let wait = server_wait(&map);
        let policy = RetryPolicy::default();
        for retry in [0, 1, 31, u32::MAX] {
            let chosen = policy.wait(retry, wait);
            assert!(chosen <= policy.max_server_wait.max(policy.max_backoff));
        }
        wait
    }

    #[test]
    fn adversarial_retry_after_values_never_panic_and_are_clamped() {
        let u64_max_plus_one = (u128::from(u64::MAX) + 1).to_string();
        let huge_integer = "9".repeat(400);
        let adversarial: Vec<&str> = vec![
            "1e30",
            "1e300",
            "1e308",
            "1.8e308",
            "-1e308",
            "inf",
            "+inf",
            "-inf",
            "infinity",
            "NaN",
            "nan",
            "-nan",
            "-1",
            "-0",
            "-0.0",
            "0",
            "0.0",
            "1e-300",
            "4.9e-324",
            "18446744073709551615",
            &u64_max_plus_one,
            &huge_integer,
            "1_000",
            "0x10",
            "",
            " ",
            "1 2",
            "१२",
            "Sun, 06 Nov 99999999999 08:49:37 GMT",
            "Sun, 06 Nov 9223372036854775807 23:59:60 GMT",
            "Sun, 06 Nov -9223372036854775808 00:00:00 GMT",
            "Sun, 06 Nov 0001 00:00:00 GMT",
            "Sun, 06 Nov 1994 99:99:99 GMT",
            "Sun, 18446744073709551615 Nov 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 18446744073709551615:00:00 GMT",
            "Sun, 06 Nov 1994",
            "Sun, 06 Nov",
            "Sun,",
            "Sun, 06 Nov 3000 00:00:00 GMT",
        ];
        for value in &adversarial {
            for name in ["retry-after", "retry-after-ms"] {
                check(name, value.as_bytes());
            }
        }
        let secs = |v: &'static str| check("retry-after", v.as_bytes());
        let ms = |v: &'static str| check("retry-after-ms", v.as_bytes());
        assert_eq!(secs("1e30"), Some(Duration::MAX));
        assert_eq!(ms("1e300"), Some(Duration::MAX));
        assert_eq!(secs("inf"), Some(Duration::MAX));
        assert_eq!(secs("-1"), None);
        assert_eq!(secs("NaN"), None);
        assert_eq!(ms("-5"), None);
        assert_eq!(secs("-0"), Some(Duration::ZERO));
        assert_eq!(
            check("retry-after", u64_max_plus_one.as_bytes()),
            Some(Duration::MAX)
        );
        assert_eq!(
            secs("Sun, 06 Nov 9223372036854775807 23:59:59 GMT"),
            Some(Duration::from_secs(u64::MAX))
        );
        assert_eq!(
            secs("Sun, 06 Nov -9223372036854775808 00:00:00 GMT"),
            Some(Duration::ZERO)
        );
        assert_eq!(secs("Sun, 06 Nov 1994 99:99:99 GMT"), None);
        let policy = RetryPolicy::default();
        assert_eq!(policy.wait(0, secs("1e30")), policy.max_server_wait);
    }

    #[test]
    fn random_retry_after_values_never_panic() {
        let mut rng = fastrand::Rng::with_seed(0x0DEC_0DE5);
        let alphabet = b"0123456789.eE+-_ infNaINF,:GMTSunNovx\xff";
        for _ in 0..20_000 {
            let len = rng.usize(..40);
            let bytes: Vec<u8> = (0..len)
                .map(|_| match rng.u8(..8) {
                    0 => rng.u8(..),
                    _ => alphabet[rng.usize(..alphabet.len())],
                })
                .collect();
            check("retry-after", &bytes);
            check("retry-after-ms", &bytes);
            // Floats of every magnitude, as a server might format them.
            let float = f64::from_bits(rng.u64(..));
            for text in [
                format!("{float}"),
                format!("{float:e}"),
                format!("{float:E}"),
            ] {
                check("retry-after", text.as_bytes());
                check("retry-after-ms", text.as_bytes());
            }
            let day = rng.u8(1..=28);
            let year = rng.i64(..);
            let date = format!("Mon, {day:02} Jan {year} 12:00:00 GMT");
            check("retry-after", date.as_bytes());
        }
    }

    #[test]
    fn backoff_never_overflows() {
        let policy = RetryPolicy::default().with_backoff(Duration::MAX, Duration::MAX);
        for retry in [0, 1, 2, 30, 31, 64, u32::MAX - 1, u32::MAX] {
            // No jitter leaves the whole of Duration::MAX; full jitter takes a quarter off.
            assert_eq!(policy.wait_jittered(retry, None, 0.0), Duration::MAX);
            let least = policy.wait_jittered(retry, None, 1.0);
            assert!(
                least >= Duration::MAX.mul_f64(0.74),
                "retry {retry}: {least:?}"
            );
            let wait = policy.wait(retry, None);
            assert!(wait >= least, "retry {retry}: {wait:?}");
        }
        let policy = RetryPolicy::default();
        for retry in [31, 1000, u32::MAX] {
            let wait = policy.wait(retry, None);
            assert!(wait <= policy.max_backoff && wait >= policy.max_backoff.mul_f64(0.75));
        }
    }
}
