//! Timestamps: RFC 3339 in the transcript format, whole UTC seconds inside Strata.

use strata_core::Timestamp;
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

/// Parses an RFC 3339 date-time (any offset) into UTC seconds.
pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    OffsetDateTime::parse(s, &Rfc3339).ok().map(|t| Timestamp(t.unix_timestamp()))
}

/// Formats UTC seconds as RFC 3339 (`2026-03-02T09:00:00Z`).
pub fn format_rfc3339(ts: Timestamp) -> String {
    OffsetDateTime::from_unix_timestamp(ts.0)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
        .unwrap_or_else(|| ts.0.to_string())
}

/// Parses LoCoMo's session times such as `1:56 pm on 8 May, 2023` (taken as UTC).
pub(crate) fn parse_locomo(s: &str) -> Option<Timestamp> {
    let (clock, date) = s.trim().split_once(" on ")?;
    let (hm, ampm) = clock.trim().split_once(' ')?;
    let (h, m) = hm.split_once(':')?;
    let (mut h, m): (u8, u8) = (h.parse().ok()?, m.parse().ok()?);
    match ampm.to_ascii_lowercase().as_str() {
        "am" if h == 12 => h = 0,
        "am" => {}
        "pm" if h < 12 => h += 12,
        "pm" => {}
        _ => return None,
    }
    let date = date.replace(',', "");
    let mut parts = date.split_whitespace();
    let day: u8 = parts.next()?.parse().ok()?;
    let month = match parts.next()?.to_ascii_lowercase().as_str() {
        "january" => time::Month::January,
        "february" => time::Month::February,
        "march" => time::Month::March,
        "april" => time::Month::April,
        "may" => time::Month::May,
        "june" => time::Month::June,
        "july" => time::Month::July,
        "august" => time::Month::August,
        "september" => time::Month::September,
        "october" => time::Month::October,
        "november" => time::Month::November,
        "december" => time::Month::December,
        _ => return None,
    };
    let year: i32 = parts.next()?.parse().ok()?;
    let date = time::Date::from_calendar_date(year, month, day).ok()?;
    let t = time::Time::from_hms(h, m, 0).ok()?;
    Some(Timestamp(time::PrimitiveDateTime::new(date, t).assume_utc().unix_timestamp()))
}
