//! What people read: aligned tables, ages such as `4m12s`, and durations such as `10m` read from
//! the command line.

/// `rows` under `header`, each column as wide as its widest cell, two spaces apart; the last
/// column is not padded, and no line ends in spaces.
pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let widths: Vec<usize> = (0..header.len())
        .map(|column| {
            rows.iter()
                .filter_map(|row| row.get(column))
                .map(|cell| cell.chars().count())
                .chain([header[column].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let header: Vec<String> = header.iter().map(|title| (*title).to_owned()).collect();
    let mut text = String::new();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (column, cell) in row.iter().enumerate() {
            if column > 0 {
                line.push_str("  ");
            }
            line.push_str(cell);
            let padding = widths[column].saturating_sub(cell.chars().count());
            line.extend(std::iter::repeat_n(' ', padding));
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    text
}

/// An age in whole seconds as days, hours, minutes and seconds from the largest that is not
/// zero: `42s`, `4m12s`, `1h0m5s`, `2d3h0m0s`.
pub fn age(seconds: u64) -> String {
    let parts = [
        (seconds / 86_400, 'd'),
        (seconds % 86_400 / 3600, 'h'),
        (seconds % 3600 / 60, 'm'),
        (seconds % 60, 's'),
    ];
    let first = parts.iter().position(|(n, _)| *n > 0).unwrap_or(parts.len() - 1);
    parts[first..]
        .iter()
        .map(|(n, unit)| format!("{n}{unit}"))
        .collect()
}

/// A duration typed on the command line, in whole seconds: a number of seconds (`600`), or
/// numbers each followed by `d`, `h`, `m` or `s` (`10m`, `1h30m`, `90s`). Above zero.
pub fn parse_duration(text: &str) -> Result<u64, String> {
    let invalid = || format!("{text:?} is not a duration such as 90s, 10m, 1h30m or 2d (or seconds: 600)");
    let text = text.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        let seconds: u64 = text.parse().map_err(|_| invalid())?;
        return if seconds > 0 { Ok(seconds) } else { Err(invalid()) };
    }
    let mut total: u64 = 0;
    let mut number = String::new();
    for c in text.chars() {
        if c.is_ascii_digit() {
            number.push(c);
            continue;
        }
        let unit = match c {
            'd' => 86_400,
            'h' => 3600,
            'm' => 60,
            's' => 1,
            _ => return Err(invalid()),
        };
        let n: u64 = number.parse().map_err(|_| invalid())?;
        total = n
            .checked_mul(unit)
            .and_then(|part| total.checked_add(part))
            .ok_or_else(invalid)?;
        number.clear();
    }
    if !number.is_empty() || total == 0 {
        return Err(invalid());
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_table_aligns_its_columns_and_leaves_no_trailing_spaces() {
        let rows = vec![
            vec![
                "r_1".to_owned(),
                "purchase-request".to_owned(),
                "active".to_owned(),
            ],
            vec!["r_22222".to_owned(), "p".to_owned(), "".to_owned()],
        ];
        assert_eq!(
            table(&["RUN", "PROCESS", "STATE"], &rows),
            "RUN      PROCESS           STATE\n\
             r_1      purchase-request  active\n\
             r_22222  p\n"
        );
        assert_eq!(table(&["RUN", "STATE"], &[]), "RUN  STATE\n");
    }

    #[test]
    fn a_table_measures_cells_in_characters_not_bytes() {
        let rows = vec![vec!["é".to_owned(), "x".to_owned()]];
        assert_eq!(table(&["AB", "C"], &rows), "AB  C\né   x\n");
    }

    #[test]
    fn ages_read_from_the_largest_unit_down_to_seconds() {
        assert_eq!(age(0), "0s");
        assert_eq!(age(42), "42s");
        assert_eq!(age(252), "4m12s");
        assert_eq!(age(3605), "1h0m5s");
        assert_eq!(age(2 * 86_400 + 3 * 3600), "2d3h0m0s");
    }

    #[test]
    fn durations_read_units_or_plain_seconds() {
        assert_eq!(parse_duration("600"), Ok(600));
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("10m"), Ok(600));
        assert_eq!(parse_duration("1h30m"), Ok(5400));
        assert_eq!(parse_duration("2d"), Ok(172_800));
        assert_eq!(parse_duration(" 4m12s "), Ok(252));
        for refused in [
            "",
            "0",
            "0m",
            "m",
            "10x",
            "1.5h",
            "10m5",
            "-5m",
            "99999999999999999999d",
        ] {
            assert!(parse_duration(refused).is_err(), "{refused:?}");
        }
    }
}
