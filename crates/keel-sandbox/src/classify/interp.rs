//! Shells and interpreters: a shell's `-c` script is judged as a command line; other
//! interpreters' inline code (`python -c`, `perl -e`, `ruby -e`, `node -e`, `php -r`,
//! `deno eval`) is looked through for APIs that delete, truncate or write files, or that run
//! commands (whose string arguments are then judged as command lines); in-place editing
//! (`perl -i`) and scripts downloaded and run are destructive too.

use super::{Verdict, basename, classify_source, has_downloader, listed};

/// Shells whose `-c` argument is a script.
const SHELLS: &str = "sh bash zsh dash ksh mksh ash fish";

/// Interpreters that run a script read from stdin when given none.
const INTERPRETERS: &str = "python python2 python3 perl ruby node nodejs php deno bun";

/// Programs that download.
pub(super) const DOWNLOADERS: &str = "curl wget fetch aria2c http https";

/// Names in inline code that delete, truncate, or write files.
const FILE_APIS: &str = "rmtree rmdir rmdirSync removedirs unlink unlinkSync unlinkat rmSync rm_rf rm_r rm_f \
     remove_dir remove_dir_all remove_file remove_tree remove_entry truncate truncateSync \
     ftruncate ftruncateSync writeFile writeFileSync write_text write_bytes copyfile copyFile \
     copyFileSync copytree cpSync renameSync file_put_contents";

/// Qualified calls in inline code that delete, move over, or write files (their bare names
/// are too common: `list.remove`, `str.replace`).
const QUALIFIED_APIS: [&str; 18] = [
    "os.remove",
    "os.replace",
    "os.rename",
    "shutil.move",
    "shutil.copy",
    "File.delete",
    "File.write",
    "File.rename",
    "IO.write",
    "FileUtils.",
    "Dir.delete",
    "fs.rm",
    "promises.rm",
    "Deno.remove",
    "Deno.writeTextFile",
    "Deno.writeFile",
    "Deno.truncate",
    "Bun.write",
];

/// Names in inline code that open files (a write mode among its strings then counts).
const OPEN_APIS: &str = "open fopen openSync sysopen";

/// Names in inline code that run commands.
const COMMAND_APIS: &str = "system popen Popen subprocess execSync execFileSync spawnSync spawn exec execvp \
     execv check_call check_output getoutput getstatusoutput child_process";

/// Whether `program` is a shell or an interpreter this module judges.
pub(super) fn is_interpreter(program: &str) -> bool {
    listed(SHELLS, program)
        || listed(INTERPRETERS, program)
        || program
            .strip_prefix("python")
            .is_some_and(|version| version.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

pub(super) fn classify_interpreter(
    program: &str,
    args: &[String],
    piped_from: Option<&[String]>,
    depth: usize,
    verdict: &mut Verdict,
) {
    if listed(SHELLS, program) {
        let (script_flag, script) = shell_script(args);
        if script_flag {
            if let Some(script) = script {
                classify_source(script, depth + 1, verdict);
            }
            return;
        }
        verdict.mutating();
        check_download(program, script, false, piped_from, verdict);
        return;
    }
    verdict.mutating();
    let inline = Inline::parse(program, args);
    for (flag, code) in &inline.codes {
        if let Some(api) = file_api(code) {
            verdict.destructive(format!(
                "{program} {flag} runs code that deletes or overwrites files ({api})"
            ));
        }
        if runs_commands(code) {
            let literals = literals(code);
            for literal in &literals {
                classify_source(literal, depth + 1, verdict);
            }
            // A command given as a list: `subprocess.run(["rm", "-rf", "d"])`.
            classify_source(&literals.join(" "), depth + 1, verdict);
        }
    }
    if let Some(flag) = &inline.in_place {
        verdict.destructive(format!("{program} {flag} edits files in place"));
    }
    check_download(
        program,
        inline.script,
        !inline.codes.is_empty() || inline.module,
        piped_from,
        verdict,
    );
}

/// Whether a shell's arguments have `-c`, and the script (or script file) they name.
fn shell_script(args: &[String]) -> (bool, Option<&String>) {
    let mut script_flag = false;
    let mut i = 0;
    while let Some(arg) = args.get(i) {
        if arg == "--" {
            i += 1;
            break;
        }
        if !arg.starts_with('-') || arg.len() == 1 {
            break;
        }
        if !arg.starts_with("--") && arg.contains('c') {
            script_flag = true;
        } else if arg == "-o" || arg == "-O" {
            i += 1;
        }
        i += 1;
    }
    (script_flag, args.get(i))
}

/// A script downloaded and run: `curl ... | python`, `bash <(curl ...)`.
fn check_download(
    program: &str,
    script: Option<&String>,
    inline: bool,
    piped_from: Option<&[String]>,
    verdict: &mut Verdict,
) {
    let downloaded = match script {
        Some(script) => {
            has_downloader(script) && (script.starts_with("<(") || script.starts_with("$("))
        }
        None => {
            !inline
                && piped_from.is_some_and(|words| {
                    words.iter().any(|word| listed(DOWNLOADERS, basename(word)))
                })
        }
    };
    if !downloaded {
        return;
    }
    let source = piped_from
        .and_then(|words| {
            words
                .iter()
                .find(|word| listed(DOWNLOADERS, basename(word)))
        })
        .map_or("a download", |word| basename(word));
    verdict.destructive(format!(
        "{source} | {program} runs a script downloaded from the network"
    ));
}

/// What an interpreter's arguments say it runs.
struct Inline<'a> {
    /// Inline code with the flag that gave it (`-c`, `-e`, `--eval`, `eval`).
    codes: Vec<(String, String)>,
    /// The in-place editing flag (`-i`, `-pi`), if any.
    in_place: Option<String>,
    /// The script file (or process substitution) when there is no inline code.
    script: Option<&'a String>,
    /// Whether a module is run (`python -m`), not a script from stdin.
    module: bool,
}

impl<'a> Inline<'a> {
    fn parse(program: &str, args: &'a [String]) -> Self {
        let family = if program.starts_with("python") {
            "python"
        } else if program == "nodejs" || program == "bun" {
            "node"
        } else {
            program
        };
        let mut inline = Self {
            codes: Vec::new(),
            in_place: None,
            script: None,
            module: false,
        };
        if family == "deno" && args.first().is_some_and(|sub| sub == "eval") {
            let code = args[1..].iter().find(|arg| !arg.starts_with('-'));
            inline
                .codes
                .extend(code.map(|code| ("eval".to_owned(), code.clone())));
            return inline;
        }
        let mut i = 0;
        while let Some(arg) = args.get(i) {
            i += 1;
            if arg == "--" {
                break;
            }
            if !arg.starts_with('-') || arg.len() == 1 {
                if inline.codes.is_empty() {
                    inline.script = Some(arg);
                }
                break;
            }
            let mut take_next = |flag: &str, inline: &mut Self| {
                if let Some(code) = args.get(i) {
                    inline.codes.push((flag.to_owned(), code.clone()));
                }
                i += 1;
            };
            match family {
                "python" => match arg.as_str() {
                    "-c" => {
                        take_next("-c", &mut inline);
                        break; // The rest is the code's argv.
                    }
                    "-m" => {
                        inline.module = true;
                        break;
                    }
                    "-W" | "-X" => i += 1,
                    _ if arg.starts_with("-c") => {
                        inline.codes.push(("-c".to_owned(), arg[2..].to_owned()));
                        break;
                    }
                    _ => {}
                },
                "node" => match arg.as_str() {
                    "-e" | "--eval" | "-p" | "--print" => take_next(arg, &mut inline),
                    "-r" | "--require" | "--import" => i += 1,
                    _ => {
                        if let Some(code) = arg
                            .strip_prefix("--eval=")
                            .or_else(|| arg.strip_prefix("--print="))
                        {
                            inline.codes.push(("--eval".to_owned(), code.to_owned()));
                        }
                    }
                },
                "php" => match arg.as_str() {
                    "-r" => take_next("-r", &mut inline),
                    "-d" | "-c" | "-z" => i += 1,
                    _ => {}
                },
                // perl and ruby: clusters such as `-pi.bak`, `-ne`, `-lane`.
                _ => {
                    if arg.starts_with("--") {
                        continue;
                    }
                    for (at, flag) in arg.char_indices().skip(1) {
                        let rest = &arg[at + 1..];
                        match flag {
                            'e' | 'E' => {
                                if rest.is_empty() {
                                    take_next(&format!("-{flag}"), &mut inline);
                                } else {
                                    inline.codes.push((format!("-{flag}"), rest.to_owned()));
                                }
                                break;
                            }
                            'i' => {
                                inline.in_place = Some(arg.clone());
                                break; // The rest is the backup suffix.
                            }
                            'I' | 'r' | 'C' if rest.is_empty() && family == "ruby" => {
                                i += 1;
                                break;
                            }
                            'I' | 'M' | 'm' | 'x' | 'C' | 'd' | 'D' | 'r' => break,
                            _ => {}
                        }
                    }
                }
            }
        }
        inline
    }
}

/// The first API in `code` that deletes, truncates or writes files.
fn file_api(code: &str) -> Option<String> {
    let names = identifiers(code);
    if let Some(name) = names.iter().find(|name| listed(FILE_APIS, name)) {
        return Some((*name).to_owned());
    }
    if let Some(api) = QUALIFIED_APIS.iter().find(|api| code.contains(*api)) {
        return Some((*api).trim_end_matches('.').to_owned());
    }
    if let Some(open) = names.iter().find(|name| listed(OPEN_APIS, name)) {
        let writes = literals(code)
            .into_iter()
            .find(|literal| write_mode(literal));
        if let Some(mode) = writes {
            let mode: String = mode.chars().take(8).collect();
            return Some(format!("{open} with {mode:?}"));
        }
    }
    None
}

/// Whether `literal` is an `open` mode that writes: `"w"`, `"wb"`, `"r+"`, or Perl's `">f"`.
fn write_mode(literal: &str) -> bool {
    let python_like = !literal.is_empty()
        && literal.len() <= 4
        && literal.chars().all(|c| "rwxabtU+".contains(c))
        && (literal.contains('w') || literal.contains('+'));
    let perl_like = (literal.starts_with('>') && !literal.starts_with(">>"))
        || literal.starts_with("+<")
        || literal.starts_with("+>");
    python_like || perl_like
}

fn runs_commands(code: &str) -> bool {
    code.contains('`')
        || code.contains("%x(")
        || identifiers(code)
            .iter()
            .any(|name| listed(COMMAND_APIS, name))
}

/// The identifiers of `code` (runs of letters, digits and `_`, and Ruby's `!`).
fn identifiers(code: &str) -> Vec<&str> {
    code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|word| !word.is_empty())
        .collect()
}

/// The string literals of `code` (`'...'`, `"..."`, `` `...` ``), escapes kept.
fn literals(code: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut chars = code.chars();
    while let Some(c) = chars.next() {
        if !matches!(c, '\'' | '"' | '`') {
            continue;
        }
        let mut literal = String::new();
        while let Some(next) = chars.next() {
            match next {
                '\\' => {
                    if let Some(escaped) = chars.next() {
                        literal.push(escaped);
                    }
                }
                _ if next == c => break,
                _ => literal.push(next),
            }
        }
        found.push(literal);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_code_is_found_after_clusters_and_values() {
        let args = |words: &[&str]| words.iter().map(|w| (*w).to_owned()).collect::<Vec<_>>();
        let perl = args(&["-pi.bak", "-e", "s/a/b/", "f"]);
        let parsed = Inline::parse("perl", &perl);
        assert_eq!(parsed.in_place.as_deref(), Some("-pi.bak"));
        assert_eq!(parsed.codes, vec![("-e".into(), "s/a/b/".into())]);
        let perl = args(&["-lne", "print", "f"]);
        assert_eq!(
            Inline::parse("perl", &perl).codes,
            vec![("-e".into(), "print".into())]
        );
        let python = args(&["-W", "ignore", "-c", "import os", "x"]);
        assert_eq!(
            Inline::parse("python3.12", &python).codes,
            vec![("-c".into(), "import os".into())]
        );
        let ruby = args(&["-r", "json", "-e", "File.delete('f')"]);
        assert_eq!(Inline::parse("ruby", &ruby).codes.len(), 1);
    }

    #[test]
    fn apis_are_told_apart_from_common_names() {
        assert_eq!(
            file_api("import shutil; shutil.rmtree('d')").as_deref(),
            Some("rmtree")
        );
        assert_eq!(
            file_api("l=[1]; l.remove(1); print('a'.replace('a','b'))"),
            None
        );
        assert_eq!(file_api("open('f').read()"), None);
        assert_eq!(
            file_api("open('f', 'w').write('')").as_deref(),
            Some("open with \"w\"")
        );
        assert_eq!(
            file_api("open(F, '>out.txt')").as_deref(),
            Some("open with \">out.txt\"")
        );
        assert_eq!(file_api("open(F, '>>log')"), None);
    }
}
