//! Number formatting shared by the tables, the statements and the plots. Fixed digits per
//! kind of quantity, so the same input always prints the same text.

/// `16777216` -> `16,777,216` (rounded to an integer first).
pub fn grouped(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    klab_model::bound::group(v.round() as i64)
}

/// A value with thousands separators and `decimals` decimals: `2885.22` -> `2,885.2`.
pub fn grouped_decimals(v: f64, decimals: usize) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    let s = format!("{:.*}", decimals, v.abs());
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s.as_str(), None),
    };
    let int = klab_model::bound::group(int.parse::<i64>().unwrap_or(0));
    let sign = if v < 0.0 && s.chars().any(|c| c.is_ascii_digit() && c != '0') {
        "-"
    } else {
        ""
    };
    match frac {
        Some(f) => format!("{sign}{int}.{f}"),
        None => format!("{sign}{int}"),
    }
}

/// Bandwidth, GB/s: one decimal.
pub fn gb_s(v: f64) -> String {
    grouped_decimals(v, 1)
}

/// Milliseconds: six decimals (what `klab transpose` prints).
pub fn ms(v: f64) -> String {
    format!("{v:.6}")
}

/// Microseconds: three decimals.
pub fn us(v: f64) -> String {
    format!("{v:.3}")
}

/// A percentage: one decimal and the sign.
pub fn pct(v: f64) -> String {
    format!("{v:.1}%")
}

/// A ratio: three significant decimals and `x`.
pub fn ratio(v: f64) -> String {
    format!("{v:.3}x")
}

/// A predicted or measured counter: integers grouped, fractions with two decimals.
pub fn counter(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        grouped(v)
    } else {
        format!("{v:.2}")
    }
}

/// A short count for a plot label: `16488054` -> `16.49M`, `524288` -> `524.3k`, `32` -> `32`.
pub fn compact(v: f64) -> String {
    let a = v.abs();
    if a >= 1e9 {
        format!("{:.2}G", v / 1e9)
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

/// An axis tick: up to three significant digits, no trailing zeros, powers of ten from
/// 1e4 up and below 1e-3 as `1e5`.
pub fn tick(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return "0".into();
    }
    let e = v.abs().log10().floor() as i32;
    if !(-3..4).contains(&e) {
        let m = v / 10f64.powi(e);
        let m = format!("{m:.2}");
        let m = m.trim_end_matches('0').trim_end_matches('.');
        return format!("{m}e{e}");
    }
    let decimals = (2 - e).max(0) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// An optional value through `f`, or `n/a`.
pub fn opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map(f).unwrap_or_else(|| "n/a".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_print_the_same_way_every_time() {
        assert_eq!(gb_s(2885.22), "2,885.2");
        assert_eq!(gb_s(500.06), "500.1");
        assert_eq!(grouped_decimals(-1234.5, 1), "-1,234.5");
        assert_eq!(grouped(16_777_216.0), "16,777,216");
        assert_eq!(counter(32.0), "32");
        assert_eq!(counter(31.456), "31.46");
        assert_eq!(compact(16_488_054.0), "16.49M");
        assert_eq!(compact(0.0), "0");
        assert_eq!(tick(0.01), "0.01");
        assert_eq!(tick(100.0), "100");
        assert_eq!(tick(100000.0), "1e5");
        assert_eq!(tick(2500.0), "2500");
        assert_eq!(tick(0.0001), "1e-4");
        assert_eq!(ms(0.0465191), "0.046519");
        assert_eq!(opt(None, pct), "n/a");
    }
}
