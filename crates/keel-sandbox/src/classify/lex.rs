//! A small `bash` tokenizer: enough of the grammar to find every simple command in a command
//! line, its words with quotes and escapes removed, where it redirects output, what is piped
//! into it, and the text of its substitutions.

/// A command line taken apart.
pub(super) struct Parsed {
    /// Every simple command, in order (those inside substitutions are in `nested`).
    pub(super) simples: Vec<Simple>,
    /// The text inside `$(...)`, backticks, `<(...)` and `>(...)`, to be judged too.
    pub(super) nested: Vec<String>,
}

/// Takes `source` apart. Never fails: unterminated quotes and substitutions run to the end.
pub(super) fn parse(source: &str) -> Parsed {
    let lexed = Lexer::lex(source);
    Parsed {
        simples: split(lexed.tokens),
        nested: lexed.nested,
    }
}

/// A piece of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    /// A word with quotes and escapes removed. Substitutions keep their text (`$(pwd)`).
    Word(String),
    /// An operator that ends a simple command.
    Op(Op),
    /// Output redirected into a file (`> file`, `>> file`, `&> file`, `<> file`).
    Write(Redirect),
}

/// Output redirected into a file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Redirect {
    /// The operator as written, with its descriptor number (`>`, `2>`, `&>>`, `>|`, `<>`).
    pub(super) op: String,
    /// The file, quotes and escapes removed.
    pub(super) target: String,
    /// Whether the file is emptied first (`>`, `>|`, `&>`), not appended to or opened as is.
    pub(super) truncates: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `&&`, `||`, `;`, `&`, newline, `(`, `)`.
    Sequence,
    /// `|` and `|&`.
    Pipe,
}

/// A command line split into tokens, with the sources of its substitutions.
struct Lexed {
    tokens: Vec<Token>,
    /// The text inside `$(...)`, backticks, `<(...)` and `>(...)`, to be judged too.
    nested: Vec<String>,
}

struct Lexer {
    chars: Vec<char>,
    pos: usize,
    tokens: Vec<Token>,
    nested: Vec<String>,
    /// Here-document delimiters waiting for the next newline.
    heredocs: Vec<String>,
}

impl Lexer {
    fn lex(source: &str) -> Lexed {
        let mut lexer = Self {
            chars: source.chars().collect(),
            pos: 0,
            tokens: Vec::new(),
            nested: Vec::new(),
            heredocs: Vec::new(),
        };
        lexer.run();
        Lexed {
            tokens: lexer.tokens,
            nested: lexer.nested,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.pos + ahead).copied()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\r' => self.pos += 1,
                '\\' if self.peek_at(1) == Some('\n') => self.pos += 2,
                '\n' => {
                    self.pos += 1;
                    self.tokens.push(Token::Op(Op::Sequence));
                    self.skip_heredocs();
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                ';' | '(' | ')' => {
                    self.pos += 1;
                    // `;;`, `;&` and `;;&` end a `case` branch.
                    while c == ';' && matches!(self.peek(), Some(';' | '&')) {
                        self.pos += 1;
                    }
                    self.tokens.push(Token::Op(Op::Sequence));
                }
                '&' => match self.peek_at(1) {
                    Some('&') => {
                        self.pos += 2;
                        self.tokens.push(Token::Op(Op::Sequence));
                    }
                    Some('>') => {
                        self.pos += 2;
                        let append = self.peek() == Some('>');
                        if append {
                            self.pos += 1;
                        }
                        let target = self.target();
                        self.push_write(if append { "&>>" } else { "&>" }, target, !append);
                    }
                    _ => {
                        self.pos += 1;
                        self.tokens.push(Token::Op(Op::Sequence));
                    }
                },
                '|' => {
                    self.pos += 1;
                    match self.peek() {
                        Some('|') => {
                            self.pos += 1;
                            self.tokens.push(Token::Op(Op::Sequence));
                        }
                        Some('&') => {
                            self.pos += 1;
                            self.tokens.push(Token::Op(Op::Pipe));
                        }
                        _ => self.tokens.push(Token::Op(Op::Pipe)),
                    }
                }
                '<' | '>' if self.peek_at(1) != Some('(') => self.redirect(String::new()),
                '0'..='9' if self.fd_redirect_ahead() => {
                    let mut fd = String::new();
                    while let Some(digit) = self.peek().filter(char::is_ascii_digit) {
                        fd.push(digit);
                        self.pos += 1;
                    }
                    self.redirect(fd);
                }
                _ => {
                    let word = self.word();
                    self.tokens.push(Token::Word(word));
                }
            }
        }
    }

    /// Whether digits here are a file descriptor number before `<` or `>` (`2>&1`).
    fn fd_redirect_ahead(&self) -> bool {
        let mut at = self.pos;
        while self.chars.get(at).is_some_and(char::is_ascii_digit) {
            at += 1;
        }
        matches!(self.chars.get(at), Some('<' | '>')) && self.chars.get(at + 1) != Some(&'(')
    }

    fn push_write(&mut self, op: impl Into<String>, target: String, truncates: bool) {
        self.tokens.push(Token::Write(Redirect {
            op: op.into(),
            target,
            truncates,
        }));
    }

    /// A redirection operator at `<` or `>` (after descriptor number `fd`), and its target.
    fn redirect(&mut self, fd: String) {
        let first = self.peek();
        self.pos += 1;
        if first == Some('<') {
            match self.peek() {
                Some('<') => {
                    self.pos += 1;
                    if self.peek() == Some('<') {
                        // A here-string: the word is input.
                        self.pos += 1;
                        self.target();
                        return;
                    }
                    if self.peek() == Some('-') {
                        self.pos += 1;
                    }
                    let delimiter = self.target();
                    self.heredocs.push(delimiter);
                }
                Some('>') => {
                    self.pos += 1;
                    let target = self.target();
                    self.push_write(fd + "<>", target, false);
                }
                Some('&') => {
                    self.pos += 1;
                    self.target();
                }
                _ => {
                    self.target();
                }
            }
            return;
        }
        let op = match self.peek() {
            Some(c @ ('>' | '|' | '&')) => {
                self.pos += 1;
                format!("{fd}>{c}")
            }
            _ => format!("{fd}>"),
        };
        let target = self.target();
        let is_fd = !target.is_empty() && target.chars().all(|c| c.is_ascii_digit() || c == '-');
        if op.ends_with(">&") && is_fd {
            return; // `2>&1`, `>&-`: descriptors, not files.
        }
        let truncates = !op.ends_with(">>");
        self.push_write(op, target, truncates);
    }

    /// The word after a redirection operator.
    fn target(&mut self) -> String {
        while matches!(self.peek(), Some(' ' | '\t')) {
            self.pos += 1;
        }
        self.word()
    }

    /// Skips the bodies of pending here-documents, which start after a newline.
    fn skip_heredocs(&mut self) {
        for delimiter in std::mem::take(&mut self.heredocs) {
            loop {
                let start = self.pos;
                while self.peek().is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[start..self.pos].iter().collect();
                if self.peek().is_none() {
                    return;
                }
                self.pos += 1;
                if line.trim() == delimiter {
                    break;
                }
            }
        }
    }

    /// One word: quotes and escapes removed, substitutions kept as text and recorded.
    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\n' | '\r' | ';' | '&' | '|' | ')' => break,
                '(' if word.ends_with('=') => {
                    // An array assignment: `a=(1 2)`.
                    let inner = self.balanced('(', ')');
                    word.push('(');
                    word.push_str(&inner);
                    word.push(')');
                }
                '(' => break,
                '<' | '>' if self.peek_at(1) == Some('(') => {
                    self.pos += 1;
                    let inner = self.balanced('(', ')');
                    word.push(c);
                    word.push('(');
                    word.push_str(&inner);
                    word.push(')');
                    self.nested.push(inner);
                }
                '<' | '>' => break,
                '\\' => {
                    self.pos += 1;
                    if let Some(next) = self.peek() {
                        self.pos += 1;
                        if next != '\n' {
                            word.push(next);
                        }
                    }
                }
                '\'' => {
                    self.pos += 1;
                    while let Some(next) = self.peek() {
                        self.pos += 1;
                        if next == '\'' {
                            break;
                        }
                        word.push(next);
                    }
                }
                '"' => self.double_quoted(&mut word),
                '`' => self.backticks(&mut word),
                '$' => self.dollar(&mut word, false),
                _ => {
                    word.push(c);
                    self.pos += 1;
                }
            }
        }
        word
    }

    fn double_quoted(&mut self, word: &mut String) {
        self.pos += 1;
        while let Some(c) = self.peek() {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => match self.peek_at(1) {
                    Some(next @ ('$' | '`' | '"' | '\\')) => {
                        word.push(next);
                        self.pos += 2;
                    }
                    Some('\n') => self.pos += 2,
                    _ => {
                        word.push('\\');
                        self.pos += 1;
                    }
                },
                '`' => self.backticks(word),
                '$' => self.dollar(word, true),
                _ => {
                    word.push(c);
                    self.pos += 1;
                }
            }
        }
    }

    fn backticks(&mut self, word: &mut String) {
        self.pos += 1;
        let mut inner = String::new();
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '`' => break,
                '\\' => {
                    if let Some(next) = self.peek() {
                        self.pos += 1;
                        if !matches!(next, '`' | '\\' | '$') {
                            inner.push('\\');
                        }
                        inner.push(next);
                    }
                }
                _ => inner.push(c),
            }
        }
        word.push('`');
        word.push_str(&inner);
        word.push('`');
        self.nested.push(inner);
    }

    /// `$...` at the current position: `$(...)`, `$((...))`, `${...}`, `$'...'` or a plain `$`.
    fn dollar(&mut self, word: &mut String, in_double_quotes: bool) {
        match self.peek_at(1) {
            Some('(') => {
                self.pos += 1;
                let arithmetic = self.peek_at(1) == Some('(');
                let inner = self.balanced('(', ')');
                word.push_str("$(");
                word.push_str(&inner);
                word.push(')');
                if !arithmetic {
                    self.nested.push(inner);
                }
            }
            Some('{') => {
                self.pos += 1;
                let inner = self.balanced('{', '}');
                word.push_str("${");
                word.push_str(&inner);
                word.push('}');
            }
            Some('\'') if !in_double_quotes => {
                self.pos += 2;
                while let Some(c) = self.peek() {
                    self.pos += 1;
                    match c {
                        '\'' => break,
                        '\\' => {
                            if let Some(next) = self.peek() {
                                self.pos += 1;
                                word.push(match next {
                                    'n' => '\n',
                                    't' => '\t',
                                    other => other,
                                });
                            }
                        }
                        _ => word.push(c),
                    }
                }
            }
            _ => {
                word.push('$');
                self.pos += 1;
            }
        }
    }

    /// The text between `open` at the current position and its matching `close`, skipping
    /// quoted text and escapes; leaves the position after `close` (or at the end).
    fn balanced(&mut self, open: char, close: char) -> String {
        self.pos += 1;
        let start = self.pos;
        let mut depth = 1usize;
        while let Some(c) = self.peek() {
            self.pos += 1;
            match c {
                '\\' => self.pos += 1,
                '\'' => {
                    while self.peek().is_some_and(|c| c != '\'') {
                        self.pos += 1;
                    }
                    self.pos += 1;
                }
                '"' => {
                    while let Some(c) = self.peek() {
                        self.pos += 1;
                        match c {
                            '\\' => self.pos += 1,
                            '"' => break,
                            _ => {}
                        }
                    }
                }
                c if c == open => depth += 1,
                c if c == close => {
                    depth -= 1;
                    if depth == 0 {
                        return self.chars[start..self.pos - 1].iter().collect();
                    }
                }
                _ => {}
            }
        }
        self.pos = self.pos.min(self.chars.len());
        self.chars[start.min(self.pos)..self.pos].iter().collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Simple commands

/// One simple command: its words, the files it redirects output into, and the words of the
/// command piped into it.
#[derive(Debug, Default)]
pub(super) struct Simple {
    /// The words, quotes and escapes removed.
    pub(super) words: Vec<String>,
    /// The files output is redirected into.
    pub(super) writes: Vec<Redirect>,
    /// The words of the command piped into this one.
    pub(super) piped_from: Option<Vec<String>>,
}

fn split(tokens: Vec<Token>) -> Vec<Simple> {
    let mut simples = Vec::new();
    let mut current = Simple::default();
    let mut last_words: Vec<String> = Vec::new();
    for token in tokens {
        match token {
            Token::Word(word) => current.words.push(word),
            Token::Write(target) => current.writes.push(target),
            Token::Op(op) => {
                let piped_from = (op == Op::Pipe).then(|| {
                    if current.words.is_empty() {
                        last_words.clone()
                    } else {
                        current.words.clone()
                    }
                });
                if !current.words.is_empty() || !current.writes.is_empty() {
                    last_words.clone_from(&current.words);
                    simples.push(std::mem::take(&mut current));
                }
                current.piped_from = piped_from;
            }
        }
    }
    if !current.words.is_empty() || !current.writes.is_empty() {
        simples.push(current);
    }
    simples
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexer_honours_quotes_escapes_and_substitutions() {
        let lexed = Lexer::lex(r#"echo 'a b' "c $(d e) \"f\"" g\ h 2>&1 >out $'i\tj'"#);
        assert_eq!(
            lexed.tokens,
            vec![
                Token::Word("echo".into()),
                Token::Word("a b".into()),
                Token::Word("c $(d e) \"f\"".into()),
                Token::Word("g h".into()),
                Token::Write(Redirect {
                    op: ">".into(),
                    target: "out".into(),
                    truncates: true,
                }),
                Token::Word("i\tj".into()),
            ]
        );
        assert_eq!(lexed.nested, vec!["d e".to_owned()]);
    }
}
