//! Commands that replace files already there: redirections that empty a file, `tee`,
//! `sort -o`, and `mv`, `cp`, `ln -f`, `install` onto an existing name.

use std::path::Path;

use super::{Presence, Verdict, basename, has_long, has_short};

/// Judges a write into `target` by a redirection (`op`), `tee` or `sort -o`. A write that
/// `truncates` a file that may exist loses what it held; appending (`>>`) only changes it.
pub(super) fn check_write(op: &str, target: &str, truncates: bool, verdict: &mut Verdict) {
    const SINKS: [&str; 5] = ["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty", "-"];
    if SINKS.contains(&target)
        || target.starts_with("/dev/fd/")
        || target.starts_with("/proc/self/fd/")
    {
        return;
    }
    if is_disk_device(target) {
        verdict.destructive(format!("writing to {target} overwrites a disk device"));
        return;
    }
    verdict.mutating();
    if !truncates {
        return;
    }
    match verdict.presence(target) {
        Presence::Absent => {}
        Presence::Present => verdict.destructive(format!(
            "{op} {target} empties the existing {target} first, losing what it held"
        )),
        Presence::Unknown => {
            let hint = if op.starts_with("tee") {
                " (tee -a appends)"
            } else if op.contains('>') {
                " (>> appends)"
            } else {
                ""
            };
            verdict.destructive(format!(
                "{op} {target} empties {target} first if it exists, losing what it held{hint}"
            ));
        }
    }
}

fn is_disk_device(path: &str) -> bool {
    const DISKS: [&str; 11] = [
        "/dev/sd",
        "/dev/hd",
        "/dev/vd",
        "/dev/xvd",
        "/dev/nvme",
        "/dev/mmcblk",
        "/dev/disk",
        "/dev/dm-",
        "/dev/md",
        "/dev/mapper/",
        "/dev/loop",
    ];
    DISKS.iter().any(|disk| path.starts_with(disk))
}

/// `tee FILE...`: empties each file unless `-a`.
pub(super) fn classify_tee(args: &[String], verdict: &mut Verdict) {
    let append = has_short(args, 'a') || has_long(args, "--append");
    for target in super::positionals(args) {
        check_write(
            if append { "tee -a" } else { "tee" },
            target,
            !append,
            verdict,
        );
    }
}

/// `mv`, `cp`, `ln`, `install`: each moves, copies or links files onto a destination, and
/// replaces a file already there unless told not to.
pub(super) fn classify_copy(program: &str, args: &[String], verdict: &mut Verdict) {
    verdict.mutating();
    let parsed = CopyArgs::parse(program, args);
    if parsed.keeps_existing {
        return;
    }
    let mut present = Vec::new();
    let mut unknown = Vec::new();
    for target in parsed.targets(verdict) {
        match verdict.presence(&target) {
            Presence::Absent => {}
            Presence::Present => present.push(target),
            Presence::Unknown => unknown.push(target),
        }
    }
    if !present.is_empty() {
        verdict.destructive(format!(
            "{program} onto {} replaces what is already there",
            listing(&present)
        ));
    }
    if !unknown.is_empty() {
        let fix = match program {
            "ln" => "without -f, ln refuses",
            "install" => "install always replaces",
            _ => "-n keeps existing files",
        };
        verdict.destructive(format!(
            "{program} onto {} replaces what is there, if anything ({fix})",
            listing(&unknown)
        ));
    }
}

/// Up to three names.
fn listing(names: &[String]) -> String {
    let mut shown = names.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if names.len() > 3 {
        shown.push_str(", ...");
    }
    shown
}

/// The options and operands of `mv`, `cp`, `ln` or `install`.
struct CopyArgs {
    /// Links `ln` makes with a single operand land in the current directory.
    links: bool,
    /// `-t DIR` / `--target-directory=DIR`.
    target_dir: Option<String>,
    /// `-T`: the destination is never a directory to copy into.
    no_target_dir: bool,
    /// `-n`, `--no-clobber`, `--update=none`, `--backup`, or for `ln` no `-f`, for `install`
    /// `-d`: nothing already there is lost.
    keeps_existing: bool,
    operands: Vec<String>,
}

impl CopyArgs {
    fn parse(program: &str, args: &[String]) -> Self {
        // Short options that take a value, per program.
        let with_value: &[char] = match program {
            "install" => &['m', 'o', 'g', 't', 'S'],
            _ => &['t', 'S'],
        };
        let mut parsed = Self {
            links: program == "ln",
            target_dir: None,
            no_target_dir: false,
            keeps_existing: false,
            operands: Vec::new(),
        };
        let mut force = false;
        let mut i = 0;
        let mut options_done = false;
        while let Some(arg) = args.get(i) {
            i += 1;
            if options_done || arg == "-" || !arg.starts_with('-') {
                parsed.operands.push(arg.clone());
                continue;
            }
            if arg == "--" {
                options_done = true;
                continue;
            }
            if let Some(long) = arg.strip_prefix("--") {
                let (name, value) = long.split_once('=').unwrap_or((long, ""));
                match name {
                    "target-directory" => {
                        parsed.target_dir = if value.is_empty() {
                            i += 1;
                            args.get(i - 1).cloned()
                        } else {
                            Some(value.to_owned())
                        };
                    }
                    "no-target-directory" => parsed.no_target_dir = true,
                    "no-clobber" | "backup" => parsed.keeps_existing = true,
                    "update" if value.starts_with("none") => parsed.keeps_existing = true,
                    "directory" if program == "install" => parsed.keeps_existing = true,
                    "force" => force = true,
                    "suffix" | "mode" | "owner" | "group" | "strip-program" if value.is_empty() => {
                        i += 1;
                    }
                    _ => {}
                }
                continue;
            }
            // A cluster of short options; one taking a value ends it.
            for (at, flag) in arg.char_indices().skip(1) {
                match flag {
                    'f' => force = true,
                    'n' if program != "ln" => parsed.keeps_existing = true,
                    'b' => parsed.keeps_existing = true,
                    'd' if program == "install" => parsed.keeps_existing = true,
                    'T' => parsed.no_target_dir = true,
                    flag if with_value.contains(&flag) => {
                        let rest = &arg[at + flag.len_utf8()..];
                        let value = if rest.is_empty() {
                            i += 1;
                            args.get(i - 1).cloned()
                        } else {
                            Some(rest.to_owned())
                        };
                        if flag == 't' {
                            parsed.target_dir = value;
                        }
                        break;
                    }
                    _ => {}
                }
            }
        }
        if program == "ln" && !force {
            // `ln` refuses to replace a name that exists unless forced.
            parsed.keeps_existing = true;
        }
        parsed
    }

    /// The names the command will write, as far as they can be known.
    fn targets(&self, verdict: &Verdict) -> Vec<String> {
        let into = |dir: &str, sources: &[String]| -> Vec<String> {
            sources
                .iter()
                .map(|source| {
                    let name = basename(source.trim_end_matches('/'));
                    format!("{}/{name}", dir.trim_end_matches('/'))
                })
                .collect()
        };
        if let Some(dir) = &self.target_dir {
            return into(dir, &self.operands);
        }
        match self.operands.as_slice() {
            [] => Vec::new(),
            // `ln -sf /a/b` links `b` here; `cp x` alone fails.
            [single] if self.links => vec![basename(single.trim_end_matches('/')).to_owned()],
            [_] => Vec::new(),
            [sources @ .., dest] => {
                let dest_is_dir = !self.no_target_dir
                    && (sources.len() > 1
                        || dest.ends_with('/')
                        || verdict.presence_is_dir(Path::new(dest)));
                if dest_is_dir {
                    into(dest, sources)
                } else {
                    vec![dest.clone()]
                }
            }
        }
    }
}
