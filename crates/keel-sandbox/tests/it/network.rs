//! Network off for real: TCP connect and bind, UDP, abstract Unix sockets and an i386 system
//! call around the filter all fail with the network off, and work with it on.
//!
//! The probes run inside the sandbox as this test binary itself (`net_probe`, selected by
//! `KEEL_PROBE`), so they need no tool from the machine. They need Landlock; on a kernel
//! without it they fail unless `KEEL_TEST_ALLOW_NO_LANDLOCK=1`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::print_stdout)]

use std::io::Read;
use std::net::{TcpListener, UdpSocket};
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::Path;

use keel_sandbox::tools::{RunCommand, RunCommandArgs};
use keel_sandbox::{SandboxMode, SandboxPolicy};
use keel_tool::{Tool, ToolContext, ToolError, ToolOutput};

/// Runs in the sandbox: does what `KEEL_PROBE` names and prints `PROBE ok` or
/// `PROBE err <error>`. Does nothing in a normal test run.
#[test]
fn net_probe() {
    let Ok(action) = std::env::var("KEEL_PROBE") else {
        return;
    };
    let target = std::env::var("KEEL_PROBE_TARGET").unwrap_or_default();
    let result: std::io::Result<String> = match action.as_str() {
        "tcp_connect" => std::net::TcpStream::connect(&target).map(|_| "connected".to_owned()),
        "tcp_bind" => TcpListener::bind("127.0.0.1:0").map(|_| "bound".to_owned()),
        "udp_send" => UdpSocket::bind("127.0.0.1:0")
            .and_then(|socket| socket.send_to(b"hello", &target))
            .map(|n| format!("sent {n}")),
        "abstract" => SocketAddr::from_abstract_name(target.as_bytes())
            .and_then(|addr| UnixStream::connect_addr(&addr))
            .map(|_| "connected".to_owned()),
        "int80" => Ok(int80_socket()),
        other => panic!("unknown probe {other}"),
    };
    match result {
        Ok(what) => println!("PROBE ok {what}"),
        Err(err) => println!("PROBE err {err}"),
    }
}

/// `socket(AF_INET, SOCK_STREAM, 0)` through the i386 system call table (`int 0x80`): its
/// return value.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
fn int80_socket() -> String {
    let ret: i64;
    // SAFETY: i386 socket(2) takes three integers and touches no memory; rbx (reserved by
    // the compiler) is swapped in and out around the call, so it is left as it was.
    unsafe {
        std::arch::asm!(
            "xchg {b}, rbx",
            "int 0x80",
            "xchg {b}, rbx",
            b = inout(reg) 2u64 => _,
            inlateout("rax") 359i64 => ret,
            in("rcx") 1u64,
            in("rdx") 0u64,
        );
    }
    // The i386 return value is 32 bits wide.
    let ret = ret as i32;
    format!("int80 {ret}")
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_socket() -> String {
    "int80 unsupported".to_owned()
}

fn policy(network: bool) -> SandboxPolicy {
    SandboxPolicy {
        network,
        ..SandboxPolicy::with_mode(SandboxMode::WorkspaceWrite)
    }
}

async fn call(root: &Path, policy: SandboxPolicy, command: &str) -> Result<ToolOutput, ToolError> {
    let tool = RunCommand::new(root, policy);
    let ctx = ToolContext::new(root, "network-test");
    let args = RunCommandArgs {
        command: command.to_owned(),
        timeout_secs: Some(60),
    };
    tool.call(args, &ctx).await
}

/// The `PROBE ...` line of running probe `action` against `target`; `None` when Landlock is
/// missing and the tests were told to allow that.
async fn probe(network: bool, action: &str, target: &str) -> Option<(String, ToolOutput)> {
    let root = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let probe = keel_test_support::rerun::test_name(module_path!(), "net_probe");
    let command = format!(
        "KEEL_PROBE={action} KEEL_PROBE_TARGET='{target}' '{}' --exact {probe} --nocapture \
         --test-threads=1",
        exe.display()
    );
    let output = match call(root.path(), policy(network), &command).await {
        Ok(output) => output,
        Err(ToolError::Denied(message))
            if std::env::var_os("KEEL_TEST_ALLOW_NO_LANDLOCK").is_some() =>
        {
            assert!(message.contains("needs Landlock"), "{message}");
            return None;
        }
        Err(err) => panic!("{command}: {err}"),
    };
    let line = output
        .content
        .lines()
        .find_map(|line| line.find("PROBE").map(|at| &line[at..]))
        .unwrap_or("")
        .to_owned();
    Some((line, output))
}

#[tokio::test]
async fn tcp_connect_works_only_with_the_network_on() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let target = listener.local_addr().unwrap().to_string();
    let Some((on, output)) = probe(true, "tcp_connect", &target).await else {
        return;
    };
    assert_eq!(on, "PROBE ok connected", "{}", output.content);
    let (off, output) = probe(false, "tcp_connect", &target).await.unwrap();
    assert!(off.starts_with("PROBE err"), "{}", output.content);
    assert!(off.contains("Operation not permitted"), "{off}");
    assert_eq!(output.metadata["network_blocked"], true);
}

#[tokio::test]
async fn tcp_bind_works_only_with_the_network_on() {
    let Some((on, output)) = probe(true, "tcp_bind", "").await else {
        return;
    };
    assert_eq!(on, "PROBE ok bound", "{}", output.content);
    let (off, output) = probe(false, "tcp_bind", "").await.unwrap();
    assert!(
        off.contains("Operation not permitted"),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn udp_works_only_with_the_network_on() {
    let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
    receiver
        .set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .unwrap();
    let target = receiver.local_addr().unwrap().to_string();
    let Some((on, output)) = probe(true, "udp_send", &target).await else {
        return;
    };
    assert_eq!(on, "PROBE ok sent 5", "{}", output.content);
    let mut buf = [0u8; 16];
    assert_eq!(receiver.recv(&mut buf).unwrap(), 5);
    let (off, output) = probe(false, "udp_send", &target).await.unwrap();
    assert!(
        off.contains("Operation not permitted"),
        "{}",
        output.content
    );
}

#[tokio::test]
async fn abstract_unix_sockets_work_only_with_the_network_on() {
    let name = format!("keel-test-abstract-{}", std::process::id());
    let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
    let listener = UnixListener::bind_addr(&addr).unwrap();
    listener.set_nonblocking(true).unwrap();
    let Some((on, output)) = probe(true, "abstract", &name).await else {
        return;
    };
    assert_eq!(on, "PROBE ok connected", "{}", output.content);
    let (off, output) = probe(false, "abstract", &name).await.unwrap();
    assert!(off.starts_with("PROBE err"), "{}", output.content);
    // Nothing reached the listener but the first connection.
    let mut accepted = 0;
    while let Ok((mut stream, _)) = listener.accept() {
        let _ = stream.read(&mut [0u8; 1]);
        accepted += 1;
    }
    assert_eq!(accepted, 1);
}

#[tokio::test]
async fn an_i386_system_call_cannot_get_around_the_filter() {
    if !cfg!(target_arch = "x86_64") {
        println!("skipped: int 0x80 is an x86-64 matter");
        return;
    }
    let Some((on, output)) = probe(true, "int80", "").await else {
        return;
    };
    let ret: i32 = on
        .strip_prefix("PROBE ok int80 ")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{}", output.content));
    if ret < 0 {
        println!("skipped: this kernel runs no i386 system calls (int 0x80 gave {ret})");
        return;
    }
    let (off, output) = probe(false, "int80", "").await.unwrap();
    // The filter's architecture check kills the process before the call runs.
    assert_eq!(off, "", "{}", output.content);
    assert_eq!(output.metadata["signal"], 31, "{}", output.content);
}

#[tokio::test]
async fn read_only_mode_has_no_network_either() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = tempfile::tempdir().unwrap();
    let command = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let Ok(output) = call(
        root.path(),
        SandboxPolicy::with_mode(SandboxMode::ReadOnly),
        &command,
    )
    .await
    else {
        return;
    };
    assert!(!output.content.contains("connected"), "{}", output.content);
    assert_eq!(output.metadata["network_blocked"], true);
    // Full access always has the network, whatever the policy says.
    let full = SandboxPolicy {
        network: false,
        ..SandboxPolicy::with_mode(SandboxMode::FullAccess)
    };
    let output = call(root.path(), full, &command).await.unwrap();
    assert_eq!(output.content, "connected\n[exit code 0]\n");
}
