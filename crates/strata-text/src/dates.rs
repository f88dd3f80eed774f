//! Calendar dates, and relative time expressions ("yesterday", "last Tuesday", "two weeks ago")
//! resolved against the moment a turn was said, so that a turn read weeks later still says
//! when things happened.

use std::sync::OnceLock;

use regex::Regex;
use strata_core::Timestamp;

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const WEEKDAYS: [&str; 7] = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"];

/// A civil date (proleptic Gregorian, UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Date {
    pub year: i64,
    /// 1 to 12.
    pub month: u32,
    /// 1 to 31.
    pub day: u32,
}

impl Date {
    /// The date of a Unix time (Hinnant's days-to-civil algorithm).
    pub fn of(ts: Timestamp) -> Date {
        Date::from_days(ts.seconds().div_euclid(86_400))
    }

    pub fn from_days(days: i64) -> Date {
        let z = days + 719_468;
        let era = z.div_euclid(146_097);
        let doe = z - era * 146_097;
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
        let mp = (5 * doy + 2) / 153;
        let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
        let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
        Date { year: yoe + era * 400 + i64::from(month <= 2), month, day }
    }

    /// Days since 1 January 1970.
    pub fn days(self) -> i64 {
        let y = self.year - i64::from(self.month <= 2);
        let era = y.div_euclid(400);
        let yoe = y - era * 400;
        let m = i64::from(self.month);
        let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(self.day) - 1;
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
        era * 146_097 + doe - 719_468
    }

    /// 0 for Sunday to 6 for Saturday (1 January 1970 was a Thursday).
    pub fn weekday(self) -> usize {
        (self.days() + 4).rem_euclid(7) as usize
    }

    pub fn plus_days(self, n: i64) -> Date {
        Date::from_days(self.days() + n)
    }

    /// The first day of the month `n` months away.
    pub fn plus_months(self, n: i64) -> Date {
        let index = self.year * 12 + i64::from(self.month) - 1 + n;
        Date { year: index.div_euclid(12), month: (index.rem_euclid(12) + 1) as u32, day: 1 }
    }

    /// "May 2023".
    pub fn month_name(self) -> String {
        format!("{} {}", MONTHS[self.month as usize - 1], self.year)
    }
}

impl std::fmt::Display for Date {
    /// "8 May 2023".
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {}", self.day, MONTHS[self.month as usize - 1], self.year)
    }
}

/// A relative expression in a turn and what it means on the day the turn was said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// The expression as written, lowercased ("last tuesday").
    pub phrase: String,
    /// "the Tuesday before 20 July 2023 (18 July 2023)".
    pub means: String,
}

/// What the relative time expressions of `texts` meant when they were said at `ts`, as the note
/// a quoted line opens with ("[yesterday = 7 May 2023; ...] "): read weeks later, "yesterday"
/// no longer says when. Empty when they hold none. The one renderer of these notes.
pub fn relative_note<'a>(texts: impl IntoIterator<Item = &'a str>, ts: Timestamp) -> String {
    let notes: Vec<String> = texts
        .into_iter()
        .flat_map(|t| resolve_relative(t, ts))
        .map(|r| format!("{} = {}", r.phrase, r.means))
        .collect();
    if notes.is_empty() {
        String::new()
    } else {
        format!("[{}] ", notes.join("; "))
    }
}

/// The line that opens a day in a quoted block: "[8 May 2023]".
pub fn date_line(day: Date) -> String {
    format!("[{day}]")
}

fn pattern() -> &'static Regex {
    static RE: OnceLock<Regex> = OnceLock::new();
    RE.get_or_init(|| {
        Regex::new(
            r"(?i)\b(yesterday|today|tonight|this morning|this afternoon|this evening|last night|last week|last weekend|last month|last year|next week|next weekend|next month|next year|last (?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)|(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten) (?:day|week|month|year)s? ago)\b",
        )
        .expect("valid pattern")
    })
}

fn number(word: &str) -> Option<i64> {
    Some(match word {
        "a" | "an" | "one" => 1,
        "two" => 2,
        "three" => 3,
        "four" => 4,
        "five" => 5,
        "six" => 6,
        "seven" => 7,
        "eight" => 8,
        "nine" => 9,
        "ten" => 10,
        digits => digits.parse().ok()?,
    })
}

/// Every relative time expression in `text`, resolved against `said`, in order, once each.
pub fn resolve_relative(text: &str, said: Timestamp) -> Vec<Resolved> {
    let d = Date::of(said);
    let mut out: Vec<Resolved> = Vec::new();
    for m in pattern().find_iter(text) {
        let phrase = m.as_str().to_lowercase();
        if out.iter().any(|r| r.phrase == phrase) {
            continue;
        }
        let means = match phrase.as_str() {
            "yesterday" | "last night" => d.plus_days(-1).to_string(),
            "today" | "tonight" | "this morning" | "this afternoon" | "this evening" => d.to_string(),
            "last week" => format!("the week before {d}"),
            "last weekend" => format!("the weekend before {d}"),
            "next week" => format!("the week after {d}"),
            "next weekend" => format!("the weekend after {d}"),
            "last month" => d.plus_months(-1).month_name(),
            "next month" => d.plus_months(1).month_name(),
            "last year" => (d.year - 1).to_string(),
            "next year" => (d.year + 1).to_string(),
            p if p.starts_with("last ") => {
                let name = &p[5..];
                let Some(w) = WEEKDAYS.iter().position(|x| x.eq_ignore_ascii_case(name)) else { continue };
                // The most recent such day strictly before the day it was said.
                let back = (d.weekday() + 7 - w - 1) % 7 + 1;
                format!("the {} before {d} ({})", WEEKDAYS[w], d.plus_days(-(back as i64)))
            }
            p => {
                let mut words = p.split_whitespace();
                let (Some(n), Some(unit)) = (words.next().and_then(number), words.next()) else { continue };
                match unit.trim_end_matches('s') {
                    "day" => d.plus_days(-n).to_string(),
                    "week" => format!("the week of {}", d.plus_days(-7 * n)),
                    "month" => d.plus_months(-n).month_name(),
                    _ => (d.year - n).to_string(),
                }
            }
        };
        out.push(Resolved { phrase, means });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(y: i64, m: u32, d: u32) -> Timestamp {
        Timestamp(Date { year: y, month: m, day: d }.days() * 86_400 + 13 * 3600)
    }

    #[test]
    fn civil_dates_round_trip() {
        for days in [-800_000, -1, 0, 1, 11_016, 19_485, 2_932_896] {
            assert_eq!(Date::from_days(days).days(), days);
        }
        assert_eq!(Date::of(Timestamp(1_683_504_000)).to_string(), "8 May 2023");
        assert_eq!(Date::of(Timestamp(951_782_400)).to_string(), "29 February 2000");
        assert_eq!(Date::of(Timestamp(-1)).to_string(), "31 December 1969");
        assert_eq!(Date::of(at(2023, 7, 20)).weekday(), 4); // a Thursday
        assert_eq!(Date { year: 2023, month: 1, day: 31 }.plus_months(-1).month_name(), "December 2022");
    }

    #[test]
    fn relative_expressions_resolve_against_the_day_said() {
        let said = at(2023, 7, 20); // Thursday 20 July 2023
        let got: Vec<(String, String)> = resolve_relative(
            "Yesterday I saw it; last Tuesday too, and LAST THURSDAY. Last week, last weekend, last month, \
             last year, next month, 3 days ago, two weeks ago, a year ago. Yesterday again.",
            said,
        )
        .into_iter()
        .map(|r| (r.phrase, r.means))
        .collect();
        let want = [
            ("yesterday", "19 July 2023"),
            ("last tuesday", "the Tuesday before 20 July 2023 (18 July 2023)"),
            ("last thursday", "the Thursday before 20 July 2023 (13 July 2023)"),
            ("last week", "the week before 20 July 2023"),
            ("last weekend", "the weekend before 20 July 2023"),
            ("last month", "June 2023"),
            ("last year", "2022"),
            ("next month", "August 2023"),
            ("3 days ago", "17 July 2023"),
            ("two weeks ago", "the week of 6 July 2023"),
            ("a year ago", "2022"),
        ];
        assert_eq!(got, want.map(|(a, b)| (a.to_string(), b.to_string())));
        assert!(resolve_relative("the weekday schedule, lastly, nextmonth", said).is_empty());
    }
}
