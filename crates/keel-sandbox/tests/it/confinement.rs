//! What a confined command may touch, for real: no device nodes, the session temp dir as
//! `TMPDIR` and not the system temp dir, nothing under `~/.cargo` but cargo's lock files (and
//! an offline cargo build still works), the session's sockets hidden, and
//! `CommandSandbox` confining another program the same way.
//!
//! Each test runs twice: with user namespaces (where the machine has them) and in a child
//! process with `KEEL_SANDBOX_NO_NAMESPACES=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::print_stdout)]

use std::path::{Path, PathBuf};

use keel_sandbox::tools::{RunCommand, RunCommandArgs};
use keel_sandbox::{CommandSandbox, SandboxMode, SandboxPolicy};
use keel_tool::{Tool, ToolContext, ToolOutput};

use crate::common::in_both_modes;

fn workspace() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("keel-confine-")
        .tempdir_in("/var/tmp")
        .unwrap()
}

async fn run_with(
    root: &Path,
    policy: SandboxPolicy,
    ctx: &ToolContext,
    command: &str,
) -> ToolOutput {
    let tool = RunCommand::new(root, policy);
    let args = RunCommandArgs {
        command: command.to_owned(),
        timeout_secs: Some(120),
    };
    tool.call(args, ctx).await.unwrap()
}

async fn run(root: &Path, command: &str) -> ToolOutput {
    let ctx = ToolContext::new(root, "confinement-test");
    run_with(root, SandboxPolicy::default(), &ctx, command).await
}

#[test]
fn device_nodes_cannot_be_made() {
    in_both_modes(module_path!(), "device_nodes_cannot_be_made", async || {
        let root = workspace();
        let output = run(
            root.path(),
            "mknod null c 1 3 && echo made; mknod disk b 8 0 && echo made; mkfifo fifo && echo fifo",
        )
        .await;
        assert!(!output.content.contains("made"), "{}", output.content);
        assert!(output.content.contains("fifo"), "{}", output.content);
        assert!(!root.path().join("null").exists());
        assert!(!root.path().join("disk").exists());
    });
}

#[test]
fn commands_hold_no_capabilities_and_cannot_read_keel_through_proc() {
    in_both_modes(
        module_path!(),
        "commands_hold_no_capabilities_and_cannot_read_keel_through_proc",
        async || {
            let root = workspace();
            // This test process stands in for keel: non-dumpable, as the binary makes itself.
            rustix::process::set_dumpable_behavior(rustix::process::DumpableBehavior::NotDumpable)
                .unwrap();
            let output = run(
                root.path(),
                &format!(
                    "grep -E '^Cap(Eff|Prm|Bnd|Amb):' /proc/self/status; \
                     cat /proc/{}/environ >/dev/null 2>&1 && echo READ-KEEL",
                    std::process::id()
                ),
            )
            .await;
            for line in output.content.lines().filter(|l| l.starts_with("Cap")) {
                assert!(
                    line.ends_with("0000000000000000"),
                    "a capability is left: {}",
                    output.content
                );
            }
            assert_eq!(
                output
                    .content
                    .lines()
                    .filter(|l| l.starts_with("Cap"))
                    .count(),
                4,
                "{}",
                output.content
            );
            assert!(!output.content.contains("READ-KEEL"), "{}", output.content);
        },
    );
}

#[test]
fn tmpdir_is_the_session_dir_and_the_system_temp_dir_is_not_writable() {
    in_both_modes(
        module_path!(),
        "tmpdir_is_the_session_dir_and_the_system_temp_dir_is_not_writable",
        async || {
            let root = workspace();
            let scratch = tempfile::tempdir().unwrap();
            let ctx = ToolContext::new(root.path(), "s").with_scratch_dir(scratch.path());
            let marker = format!("keel-confine-{}", std::process::id());
            let command = format!(
                "echo \"$TMPDIR $TMP $TEMP\"; echo kept > \"$TMPDIR/file\" && cat \"$TMPDIR/file\"; \
                 touch /tmp/{marker} /var/tmp/{marker} 2>/dev/null || echo refused"
            );
            let output = run_with(root.path(), SandboxPolicy::default(), &ctx, &command).await;
            let tmp = std::fs::canonicalize(scratch.path()).unwrap().join("tmp");
            let t = tmp.display();
            assert_eq!(
                output.content,
                format!("{t} {t} {t}\nkept\nrefused\n[exit code 0]\n")
            );
            assert!(!Path::new("/tmp").join(&marker).exists());
            assert!(!Path::new("/var/tmp").join(&marker).exists());
            let mode = std::os::unix::fs::PermissionsExt::mode(
                &std::fs::metadata(&tmp).unwrap().permissions(),
            );
            assert_eq!(mode & 0o777, 0o700);
        },
    );
}

/// `$CARGO_HOME`, else `~/.cargo`, if it exists.
fn cargo_home() -> Option<PathBuf> {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::home_dir().map(|h| h.join(".cargo")))?;
    home.is_dir().then_some(home)
}

#[test]
fn cargo_home_is_read_only_but_for_its_lock_files() {
    in_both_modes(
        module_path!(),
        "cargo_home_is_read_only_but_for_its_lock_files",
        async || {
            let Some(home) = cargo_home() else {
                println!("skipped: no cargo home on this machine");
                return;
            };
            let root = workspace();
            let probe = format!("keel-probe-{}", std::process::id());
            let command = format!(
                "cd '{h}'; mkdir -p bin; touch bin/{probe} || echo bin refused; \
             echo '# x' >> env || echo env refused; touch config.toml || echo config refused; \
             touch registry/{probe} || echo registry refused; \
             [ -e .package-cache ] && {{ : >> .package-cache && echo lock ok; }}; \
             [ -e .global-cache ] && {{ : >> .global-cache || echo global refused; }}",
                h = home.display()
            );
            let output = run(root.path(), &command).await;
            for refused in [
                "bin refused",
                "env refused",
                "config refused",
                "registry refused",
            ] {
                assert!(
                    output.content.contains(refused),
                    "{refused}: {}",
                    output.content
                );
            }
            assert!(!home.join("bin").join(&probe).exists());
            if home.join(".package-cache").exists() {
                assert!(output.content.contains("lock ok"), "{}", output.content);
            }
            if home.join(".global-cache").exists() {
                assert!(
                    output.content.contains("global refused"),
                    "{}",
                    output.content
                );
            }
        },
    );
}

/// A crate of the workspace's `Cargo.lock` whose sources cargo has already fetched and
/// extracted, with its index entry: `(name, version)`.
fn fetched_crate(home: &Path) -> Option<(String, String)> {
    let lock =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock"))
            .ok()?;
    let registries: Vec<PathBuf> = std::fs::read_dir(home.join("registry/src"))
        .ok()?
        .flatten()
        .map(|e| e.path())
        .collect();
    // Small crates without dependencies.
    for name in ["cfg-if", "itoa", "memchr", "fastrand"] {
        let needle = format!("name = \"{name}\"\nversion = \"");
        let Some(at) = lock.find(&needle) else {
            continue;
        };
        let rest = &lock[at + needle.len()..];
        let version = rest.split('"').next()?.to_owned();
        let extracted = registries
            .iter()
            .any(|r| r.join(format!("{name}-{version}/.cargo-ok")).exists());
        let indexed = std::fs::read_dir(home.join("registry/index"))
            .ok()?
            .flatten()
            .any(|index| index_cache_has(&index.path().join(".cache"), name));
        if extracted && indexed {
            return Some((name.to_owned(), version));
        }
    }
    None
}

fn index_cache_has(cache: &Path, name: &str) -> bool {
    let path = match name.len() {
        1 => cache.join("1").join(name),
        2 => cache.join("2").join(name),
        3 => cache.join("3").join(&name[..1]).join(name),
        _ => cache.join(&name[..2]).join(&name[2..4]).join(name),
    };
    path.exists()
}

#[test]
fn an_offline_cargo_build_works_with_the_network_off() {
    in_both_modes(
        module_path!(),
        "an_offline_cargo_build_works_with_the_network_off",
        async || {
            let Some(home) = cargo_home() else {
                println!("skipped: no cargo home on this machine");
                return;
            };
            let Some((name, version)) = fetched_crate(&home) else {
                println!(
                    "skipped: no small crate of the workspace's Cargo.lock is fetched and extracted"
                );
                return;
            };
            let root = workspace();
            std::fs::create_dir_all(root.path().join("src")).unwrap();
            std::fs::write(
            root.path().join("Cargo.toml"),
            format!(
                "[package]\nname = \"offline-probe\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
                 [dependencies]\n{name} = \"={version}\"\n"
            ),
        )
        .unwrap();
            std::fs::write(
                root.path().join("src/main.rs"),
                "fn main() { println!(\"built\"); }\n",
            )
            .unwrap();
            let output = run(
                root.path(),
                "env -u CARGO_TARGET_DIR -u CARGO_BUILD_TARGET_DIR cargo build --offline 2>&1 && \
             ./target/debug/offline-probe",
            )
            .await;
            println!("{}", output.content);
            assert_eq!(output.metadata["network_blocked"], true);
            assert!(
                output.content.contains("built\n[exit code 0]"),
                "{}",
                output.content
            );
        },
    );
}

#[test]
fn session_sockets_are_hidden_where_namespaces_work() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let dir = PathBuf::from(format!("/tmp/ssh-keeltest{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let socket = dir.join("agent.sock");
        let _ = std::fs::remove_file(&socket);
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let root = workspace();
        let output = run(root.path(), &format!("ls -A {}", dir.display())).await;
        let _ = std::fs::remove_file(&socket);
        let _ = std::fs::remove_dir(&dir);
        if output.metadata["namespaces"] == true {
            assert_eq!(output.content, "(no output)\n[exit code 0]\n");
        } else {
            println!("skipped: no user namespaces here, pathname sockets stay visible");
        }
    });
}

#[test]
fn command_sandbox_confines_another_program() {
    in_both_modes(
        module_path!(),
        "command_sandbox_confines_another_program",
        async || {
            let root = workspace();
            let temp = root.path().join(".scratch/tmp");
            let policy = SandboxPolicy::default();
            let sandbox = CommandSandbox::prepare(root.path(), &policy, &temp).unwrap();
            assert!(sandbox.confined());
            assert!(sandbox.network_blocked());
            let snapshot = sandbox.snapshot_protected();
            let mut command = tokio::process::Command::new("sh");
            command
            .arg("-c")
            .arg("echo ok > inside; touch /var/tmp/keel-cs-outside-$$ || echo refused; mkdir -p .keel; echo 'x' > .keel/config.toml; echo $TMPDIR")
            .current_dir(root.path())
            .process_group(0);
            sandbox.apply(&mut command);
            let output = command.output().await.unwrap();
            let text = String::from_utf8_lossy(&output.stdout);
            assert!(text.contains("refused"), "{text}");
            assert!(
                text.contains(&*sandbox.temp_dir().to_string_lossy()),
                "{text}"
            );
            assert!(root.path().join("inside").exists());
            let report = snapshot.restore();
            assert_eq!(
                report.restored,
                [PathBuf::from(".keel/config.toml")],
                "{report:?}"
            );
            assert!(!root.path().join(".keel/config.toml").exists());
        },
    );
}

#[test]
fn read_only_and_full_access_modes() {
    in_both_modes(
        module_path!(),
        "read_only_and_full_access_modes",
        async || {
            let root = workspace();
            let ctx = ToolContext::new(root.path(), "modes-test");
            let read_only = SandboxPolicy::with_mode(SandboxMode::ReadOnly);
            let output = run_with(root.path(), read_only, &ctx, "touch x || echo refused").await;
            assert_eq!(
                output.content,
                "touch: cannot touch 'x': Permission denied\nrefused\n[exit code 0]\n"
            );
            let full = SandboxPolicy::with_mode(SandboxMode::FullAccess);
            let output = run_with(root.path(), full, &ctx, "touch x && echo made").await;
            assert_eq!(output.content, "made\n[exit code 0]\n");
            assert_eq!(output.metadata["confined"], false);
        },
    );
}
