//! When and how long to wait before trying a failed request again.

use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::HeaderMap;

/// How failed requests are retried.
///
/// Retried: HTTP 408, 409, 429, 5xx (529 included), connection failures, idle timeouts and
/// streams cut before any content arrived. A server's `x-should-retry: true|false` overrides
/// the status. The wait is the server's `retry-after-ms` or `retry-after` when that is between
/// zero and [`max_server_wait`](Self::max_server_wait), else exponential backoff from
/// `initial_backoff`, doubling up to `max_backoff`, less up to 25 % jitter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (default 4).
    pub max_retries: u32,
    /// The first backoff (default 0.5 s).
    pub initial_backoff: Duration,
    /// The longest backoff (default 8 s).
    pub max_backoff: Duration,
    /// The longest server-requested wait honoured (default 60 s); a longer one falls back to
    /// backoff.
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
    pub fn wait(&self, retry: u32, server_wait: Option<Duration>) -> Duration {
        if let Some(wait) = server_wait
            && !wait.is_zero()
            && wait <= self.max_server_wait
        {
            return wait;
        }
        let factor = 2u32.saturating_pow(retry.min(30));
        let backoff = self
            .initial_backoff
            .saturating_mul(factor)
            .min(self.max_backoff);
        backoff.mul_f64(1.0 - 0.25 * fastrand::f64())
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
/// HTTP date.
pub(crate) fn server_wait(headers: &HeaderMap) -> Option<Duration> {
    if let Some(ms) = header_str(headers, "retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && ms.is_finite()
        && ms >= 0.0
    {
        return Some(Duration::from_secs_f64(ms / 1000.0));
    }
    let value = header_str(headers, "retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| Duration::from_secs_f64(secs));
    }
    let date = httpdate_seconds(value)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs();
    Some(Duration::from_secs(date.saturating_sub(now)))
}

fn header_str<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name)?.to_str().ok().map(str::trim)
}

/// Seconds since the epoch of an IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`).
fn httpdate_seconds(value: &str) -> Option<u64> {
    let mut parts = value.split_whitespace().skip(1);
    let day: u64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
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
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':').map(|p| p.parse::<u64>().ok());
    let (h, m, s) = (hms.next()??, hms.next()??, hms.next()??);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    u64::try_from(days)
        .ok()
        .map(|d| d * 86_400 + h * 3600 + m * 60 + s)
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
        assert!(policy.wait(0, Some(Duration::from_secs(61))) <= Duration::from_millis(500));
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
}
