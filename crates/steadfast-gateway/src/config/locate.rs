//! Where in the file a key is: errors say `file:line: key: constraint`.

/// serde's "expected a duration" says nothing of the form a duration takes.
pub(super) fn with_duration_hint(message: &str) -> String {
    if message.contains("duration") {
        format!(
            "{message}: write a positive number with a unit, such as \"250ms\", \"30s\", \"5m\" or \"1h\""
        )
    } else {
        message.to_owned()
    }
}

pub(super) fn quote_key(k: &str) -> String {
    if k.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        k.to_owned()
    } else {
        format!("{k:?}")
    }
}

/// The line of byte `offset`, and the dotted key written there (table header + key).
pub(super) fn locate_offset(text: &str, offset: usize) -> (Option<usize>, String) {
    let before = &text[..offset.min(text.len())];
    let line_no = before.matches('\n').count() + 1;
    let mut table = String::new();
    for l in before.lines() {
        let t = l.trim();
        if t.starts_with('[') {
            table = t.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
        }
    }
    let line = text.lines().nth(line_no - 1).unwrap_or("");
    let key = line
        .split('=')
        .next()
        .filter(|_| line.contains('='))
        .map(str::trim)
        .unwrap_or("");
    let full = match (table.is_empty(), key.is_empty()) {
        (true, _) => key.to_owned(),
        (false, true) => table,
        (false, false) => format!("{table}.{key}"),
    };
    (Some(line_no), full)
}

/// The line where `key` is set inside `table` (or its sub-tables, or inline tables), if found.
pub(super) fn find_key_line(text: &str, table: &str, key: &str) -> Option<usize> {
    let mut in_table = table.is_empty();
    let mut table_line = None;
    for (i, l) in text.lines().enumerate() {
        let t = l.trim();
        if t.starts_with('[') {
            let name = t.trim_matches(|c| c == '[' || c == ']').trim();
            in_table = name == table || name.starts_with(&format!("{table}."));
            if in_table && table_line.is_none() {
                table_line = Some(i + 1);
            }
            continue;
        }
        if in_table && !key.is_empty() {
            let found = t.split(['{', ',']).any(|part| {
                part.trim_start()
                    .strip_prefix(key)
                    .is_some_and(|rest| rest.trim_start().starts_with('='))
            });
            if found {
                return Some(i + 1);
            }
        }
    }
    table_line
}
