//! Plain text wrapped on words at the terminal's width (questions and lists that must not be
//! cut mid-word by the terminal).

/// How many columns a wrapped line may use: the terminal's width ([`crate::terminal::width`])
/// less one, so that no line fills a row to its edge (where terminals differ on what comes
/// next).
pub(crate) fn terminal_width() -> usize {
    crate::terminal::width().saturating_sub(1)
}

/// `text` cut into lines of at most `width` characters, on spaces (a word longer than the
/// line is cut where it must be); lines after the first start with `indent`. Newlines in
/// `text` start new lines.
pub(crate) fn wrap_words(text: &str, width: usize, indent: &str) -> Vec<String> {
    let width = width.max(indent.chars().count() + 10);
    let mut lines = Vec::new();
    for paragraph in text.split('\n') {
        let mut line = if lines.is_empty() {
            String::new()
        } else {
            indent.to_owned()
        };
        let mut empty = true;
        for word in paragraph.split(' ').filter(|w| !w.is_empty()) {
            let used = line.chars().count();
            let needed = word.chars().count() + usize::from(!empty);
            if !empty && used + needed > width {
                lines.push(std::mem::replace(&mut line, indent.to_owned()));
                empty = true;
            }
            if !empty {
                line.push(' ');
            }
            // A word longer than a whole line is cut.
            let mut rest: Vec<char> = word.chars().collect();
            loop {
                let room = width.saturating_sub(line.chars().count()).max(1);
                if rest.len() <= room {
                    line.extend(rest.iter());
                    break;
                }
                line.extend(rest.drain(..room));
                lines.push(std::mem::replace(&mut line, indent.to_owned()));
            }
            empty = false;
        }
        lines.push(line);
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_wrap_at_the_width_and_never_inside_a_word_that_fits() {
        let lines = wrap_words("stage and commit the files listed below please", 20, "  ");
        assert_eq!(
            lines,
            ["stage and commit the", "  files listed below", "  please"]
        );
        assert!(lines.iter().all(|l| l.chars().count() <= 20));
        let long = wrap_words("a 0123456789012345678901234 b", 20, "");
        assert!(long.iter().all(|l| l.chars().count() <= 20), "{long:?}");
        assert_eq!(wrap_words("one\ntwo", 20, "> "), ["one", "> two"]);
    }
}
