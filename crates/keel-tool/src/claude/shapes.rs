//! keel's tool calls in Claude Code's shapes, and back: what a hook written for Claude Code
//! reads as `tool_input` and `tool_response`, and what it gives as `updatedInput`.
//!
//! The one place that knows both sides: keel's argument names (those of keel-sandbox's and
//! keel-agents' tools) and the facts keel-sandbox's tools put in [`ToolOutput::metadata`]
//! (`file_path`, the text read, the file before an edit, a command's output), and Claude
//! Code's argument names and result shapes as Claude Code 2.1 sends them to hooks.
//!
//! | keel | Claude | `tool_input` | `tool_response` |
//! |---|---|---|---|
//! | `run_command` | `Bash` | `command`, `timeout` (ms) | `stdout`, `stderr`, `interrupted`, `isImage`, `noOutputExpected` |
//! | `read_file` | `Read` | `file_path`, `offset`, `limit` | `{type: "text", file: {filePath, content, numLines, startLine, totalLines}}` |
//! | `write_file` | `Write` | `file_path`, `content` | `type` (`create`/`update`), `filePath`, `content`, `structuredPatch`, `originalFile` |
//! | `patch_file` | `Edit` | `file_path`, `old_string`, `new_string`, `replace_all` | `filePath`, `oldString`, `newString`, `originalFile`, `structuredPatch`, `userModified`, `replaceAll` |
//! | `grep` | `Grep` | `pattern`, `path`, `glob`, `-i`, `head_limit` | keel's |
//! | `glob` | `Glob` | `pattern`, `path` | keel's |
//! | `list_directory` | `LS` | `path`, `ignore` | keel's |
//! | `spawn_agent` | `Agent` | `subagent_type`, `prompt` | keel's |
//!
//! Paths are absolute in Claude's shapes (keel's relative paths are taken from the session's
//! directory). keel's own response shape, for every other tool and for a failed call, is
//! `{"content": "...", "is_error": bool}`. `patch_file` makes one edit a call, so it is
//! `Edit`, never `MultiEdit`'s `edits` list.

use std::path::{Component, Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::ToolOutput;

/// Lines of context around each change in a `structuredPatch`, as Claude Code gives.
const PATCH_CONTEXT: usize = 3;

/// Claude Code's `tool_input` for a call of keel's tool `tool` with keel's `input`: the
/// argument names and forms of its Claude twin (absolute paths, milliseconds), or `input`
/// itself for a tool without one. `cwd` is the directory keel's relative paths are taken
/// from.
pub fn tool_input(tool: &str, input: &Value, cwd: &Path) -> Value {
    let Some(args) = input.as_object() else {
        return input.clone();
    };
    let mut out = Map::new();
    let mut put = |key: &str, value: Option<Value>| {
        if let Some(value) = value.filter(|value| !value.is_null()) {
            out.insert(key.to_owned(), value);
        }
    };
    let path = |key: &str| {
        args.get(key)
            .and_then(Value::as_str)
            .map(|path| json!(absolute(cwd, path)))
    };
    let arg = |key: &str| args.get(key).cloned();
    match tool {
        "run_command" => {
            put("command", arg("command"));
            put(
                "timeout",
                args.get("timeout_secs")
                    .and_then(Value::as_u64)
                    .map(|secs| json!(secs.saturating_mul(1000))),
            );
        }
        "read_file" => {
            put("file_path", path("path"));
            let start = args.get("start_line").and_then(Value::as_u64);
            put("offset", start.map(|start| json!(start)));
            put(
                "limit",
                args.get("end_line")
                    .and_then(Value::as_u64)
                    .map(|end| json!(end.saturating_sub(start.unwrap_or(1)).saturating_add(1))),
            );
        }
        "write_file" => {
            put("file_path", path("path"));
            put("content", arg("content"));
        }
        "patch_file" => {
            put("file_path", path("path"));
            put("old_string", arg("old_string"));
            put("new_string", arg("new_string"));
            put(
                "replace_all",
                Some(json!(
                    args.get("replace_all")
                        .and_then(Value::as_bool)
                        .unwrap_or(false)
                )),
            );
        }
        "grep" => {
            put("pattern", arg("pattern"));
            put("path", path("path"));
            put("glob", arg("glob"));
            put("-i", arg("case_insensitive"));
            put("head_limit", arg("max_results"));
        }
        "glob" => {
            put("pattern", arg("pattern"));
            put("path", path("path"));
        }
        "list_directory" => {
            put(
                "path",
                Some(path("path").unwrap_or_else(|| json!(absolute(cwd, ".")))),
            );
            put("ignore", arg("ignore"));
        }
        "spawn_agent" => {
            put("subagent_type", arg("agent"));
            put("prompt", arg("task"));
        }
        _ => return input.clone(),
    }
    Value::Object(out)
}

/// keel's input for its tool `tool` from Claude Code's form `claude` of it (a `PreToolUse`
/// hook's `updatedInput`): the inverse of [`tool_input`]. Claude's argument names become
/// keel's (`file_path` → `path`, relative to `cwd` when inside it; `timeout` in ms →
/// `timeout_secs`; `offset`/`limit` → `start_line`/`end_line`), Claude-only arguments keel
/// has no use for (`description`, `output_mode`, …) are dropped, and any other key (keel's own
/// names) is kept as given. A tool without a Claude twin gets `claude` as it is.
pub fn keel_input(tool: &str, claude: &Value, cwd: &Path) -> Value {
    let Some(args) = claude.as_object() else {
        return claude.clone();
    };
    // (Claude's key, keel's key; None: dropped)
    let renames: &[(&str, Option<&str>)] = match tool {
        "run_command" => &[
            ("timeout", None),
            ("description", None),
            ("run_in_background", None),
            ("dangerouslyDisableSandbox", None),
        ],
        "read_file" => &[
            ("file_path", Some("path")),
            ("offset", None),
            ("limit", None),
        ],
        "write_file" | "patch_file" => &[("file_path", Some("path"))],
        "grep" => &[
            ("-i", Some("case_insensitive")),
            ("head_limit", Some("max_results")),
            ("output_mode", None),
            ("-n", None),
            ("-A", None),
            ("-B", None),
            ("-C", None),
            ("type", None),
            ("multiline", None),
            ("offset", None),
        ],
        "spawn_agent" => &[
            ("subagent_type", Some("agent")),
            ("prompt", Some("task")),
            ("description", None),
            ("model", None),
            ("run_in_background", None),
        ],
        "glob" | "list_directory" => &[],
        _ => return claude.clone(),
    };
    let mut out = Map::new();
    for (key, value) in args {
        match renames.iter().find(|(claude_key, _)| claude_key == key) {
            Some((_, Some(keel_key))) => {
                out.insert((*keel_key).to_owned(), value.clone());
            }
            Some((_, None)) => {}
            None => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    match tool {
        "run_command" => {
            if let Some(ms) = args.get("timeout").and_then(Value::as_u64) {
                out.entry("timeout_secs")
                    .or_insert_with(|| json!(ms.div_ceil(1000).max(1)));
            }
        }
        "read_file" => {
            let offset = args.get("offset").and_then(Value::as_u64);
            if let Some(offset) = offset {
                out.entry("start_line")
                    .or_insert_with(|| json!(offset.max(1)));
            }
            if let Some(limit) = args.get("limit").and_then(Value::as_u64).filter(|l| *l > 0) {
                let start = offset.unwrap_or(1).max(1);
                out.entry("end_line")
                    .or_insert_with(|| json!(start.saturating_add(limit - 1)));
            }
        }
        _ => {}
    }
    for key in ["path"] {
        if let Some(Value::String(path)) = out.get_mut(key)
            && let Some(relative) = Path::new(path.as_str())
                .strip_prefix(cwd)
                .ok()
                .filter(|rel| !rel.as_os_str().is_empty())
        {
            *path = relative.display().to_string();
        }
    }
    Value::Object(out)
}

/// Claude Code's `tool_response` for a call of keel's tool `tool` with keel's `input` that
/// returned `output`: the result shape of its Claude twin, built from the facts the tool put
/// in [`ToolOutput::metadata`], or keel's own `{"content", "is_error"}` for a tool without a
/// twin, a failed call, or a result without those facts (a tool not from keel-sandbox).
/// Images are listed by type and size, never passed.
pub fn tool_response(tool: &str, input: &Value, output: &ToolOutput, cwd: &Path) -> Value {
    let shaped = if output.is_error {
        None
    } else {
        match tool {
            "run_command" => bash_response(output),
            "read_file" => read_response(output, cwd),
            "write_file" => write_response(input, output, cwd),
            "patch_file" => edit_response(input, output, cwd),
            _ => None,
        }
    };
    shaped.unwrap_or_else(|| keel_response(output))
}

/// keel's own shape of a result: `{"content", "is_error"}`, and `images` (type and size) when
/// it carries images.
fn keel_response(output: &ToolOutput) -> Value {
    let mut response = json!({"content": output.content, "is_error": output.is_error});
    if !output.images.is_empty() {
        response["images"] = output
            .images
            .iter()
            .map(|image| json!({"media_type": image.media_type(), "bytes": image.decoded_len()}))
            .collect();
    }
    response
}

fn bash_response(output: &ToolOutput) -> Option<Value> {
    let meta = &output.metadata;
    let stdout = meta.get("stdout").and_then(Value::as_str)?;
    let flag = |key: &str| meta.get(key).and_then(Value::as_bool).unwrap_or(false);
    Some(json!({
        "stdout": stdout,
        "stderr": "",
        "interrupted": flag("timed_out") || flag("cancelled"),
        "isImage": false,
        "noOutputExpected": false,
    }))
}

fn read_response(output: &ToolOutput, cwd: &Path) -> Option<Value> {
    let meta = &output.metadata;
    let content = meta.get("content").and_then(Value::as_str)?;
    let start = meta.get("start_line").and_then(Value::as_u64).unwrap_or(1);
    let end = meta.get("end_line").and_then(Value::as_u64);
    let num_lines = end.map_or(0, |end| end.saturating_sub(start).saturating_add(1));
    Some(json!({
        "type": "text",
        "file": {
            "filePath": file_path(meta, cwd)?,
            "content": content,
            "numLines": num_lines,
            "startLine": start,
            "totalLines": meta.get("total_lines").and_then(Value::as_u64).unwrap_or(0),
        }
    }))
}

fn write_response(input: &Value, output: &ToolOutput, cwd: &Path) -> Option<Value> {
    let meta = &output.metadata;
    let content = input.get("content").and_then(Value::as_str)?;
    let created = meta.get("created").and_then(Value::as_bool)?;
    let original = meta.get("original").and_then(Value::as_str);
    let patch = match original {
        Some(original) if !created => structured_patch(original, content),
        _ => Vec::new(),
    };
    Some(json!({
        "type": if created { "create" } else { "update" },
        "filePath": file_path(meta, cwd)?,
        "content": content,
        "structuredPatch": patch,
        "originalFile": if created { None } else { original },
    }))
}

fn edit_response(input: &Value, output: &ToolOutput, cwd: &Path) -> Option<Value> {
    let meta = &output.metadata;
    let old = input.get("old_string").and_then(Value::as_str)?;
    let new = input.get("new_string").and_then(Value::as_str)?;
    let replace_all = input
        .get("replace_all")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let original = meta.get("original").and_then(Value::as_str);
    let patch = original.map_or_else(Vec::new, |original| {
        // The edit as patch_file made it: in a CRLF file, `\n` in the strings meant `\r\n`.
        let crlf = meta.get("crlf").and_then(Value::as_bool).unwrap_or(false);
        let (old, new) = if crlf {
            (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"))
        } else {
            (old.to_owned(), new.to_owned())
        };
        let edited = if replace_all {
            original.replace(&old, &new)
        } else {
            original.replacen(&old, &new, 1)
        };
        structured_patch(original, &edited)
    });
    Some(json!({
        "filePath": file_path(meta, cwd)?,
        "oldString": old,
        "newString": new,
        "originalFile": original,
        "structuredPatch": patch,
        "userModified": false,
        "replaceAll": replace_all,
    }))
}

/// The absolute path of the file a result is about: the tool's `file_path`, else its `path`
/// taken from `cwd`.
fn file_path(meta: &Value, cwd: &Path) -> Option<String> {
    meta.get("file_path")
        .or_else(|| meta.get("path"))
        .and_then(Value::as_str)
        .map(|path| absolute(cwd, path))
}

/// `path` made absolute from `cwd`, `.` and `..` taken out lexically (no file is looked at).
fn absolute(cwd: &Path, path: &str) -> String {
    let joined = cwd.join(path);
    let mut clean = PathBuf::new();
    for part in joined.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                clean.pop();
            }
            other => clean.push(other),
        }
    }
    clean.display().to_string()
}

/// Claude Code's `structuredPatch` from `old` to `new`: hunks of `{oldStart, oldLines,
/// newStart, newLines, lines}` with three lines of context, lines marked ` `, `-` or `+`, as
/// the `diff` package Claude Code uses makes them.
fn structured_patch(old: &str, new: &str) -> Vec<Value> {
    let diff = similar::TextDiff::from_lines(old, new);
    diff.grouped_ops(PATCH_CONTEXT)
        .iter()
        .filter_map(|group| {
            let (first, last) = (group.first()?, group.last()?);
            let old_range = first.old_range().start..last.old_range().end;
            let new_range = first.new_range().start..last.new_range().end;
            let lines: Vec<String> = group
                .iter()
                .flat_map(|op| diff.iter_changes(op))
                .map(|change| {
                    let sign = match change.tag() {
                        similar::ChangeTag::Equal => ' ',
                        similar::ChangeTag::Delete => '-',
                        similar::ChangeTag::Insert => '+',
                    };
                    let text = change.value();
                    let text = text.strip_suffix('\n').unwrap_or(text);
                    let text = text.strip_suffix('\r').unwrap_or(text);
                    format!("{sign}{text}")
                })
                .collect();
            // The `diff` package numbers an empty side from the line before it.
            let start = |range: &std::ops::Range<usize>| {
                if range.is_empty() {
                    range.start
                } else {
                    range.start + 1
                }
            };
            Some(json!({
                "oldStart": start(&old_range),
                "oldLines": old_range.len(),
                "newStart": start(&new_range),
                "newLines": new_range.len(),
                "lines": lines,
            }))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inputs_go_to_claude_and_back() {
        let cwd = Path::new("/w");
        let cases = [
            (
                "run_command",
                json!({"command": "ls", "timeout_secs": 5}),
                json!({"command": "ls", "timeout": 5000}),
            ),
            (
                "read_file",
                json!({"path": "src/a.rs", "start_line": 10, "end_line": 19}),
                json!({"file_path": "/w/src/a.rs", "offset": 10, "limit": 10}),
            ),
            (
                "patch_file",
                json!({"path": "./a.py", "old_string": "a", "new_string": "b", "replace_all": false}),
                json!({"file_path": "/w/a.py", "old_string": "a", "new_string": "b", "replace_all": false}),
            ),
            (
                "write_file",
                json!({"path": "a.py", "content": "x"}),
                json!({"file_path": "/w/a.py", "content": "x"}),
            ),
            (
                "grep",
                json!({"pattern": "fn", "path": "src", "case_insensitive": true}),
                json!({"pattern": "fn", "path": "/w/src", "-i": true}),
            ),
            (
                "git_commit",
                json!({"message": "m"}),
                json!({"message": "m"}),
            ),
        ];
        for (tool, keel, claude) in cases {
            assert_eq!(tool_input(tool, &keel, cwd), claude, "{tool}");
            let back = keel_input(tool, &claude, cwd);
            let mut expected = keel.clone();
            if let Some(path) = expected.get_mut("path") {
                *path = json!(path.as_str().unwrap_or_default().trim_start_matches("./"));
            }
            assert_eq!(back, expected, "{tool}");
        }
        // Claude-only arguments are dropped; a path outside the directory stays absolute.
        assert_eq!(
            keel_input(
                "run_command",
                &json!({"command": "ls", "description": "list", "timeout": 1500}),
                cwd
            ),
            json!({"command": "ls", "timeout_secs": 2})
        );
        assert_eq!(
            keel_input(
                "write_file",
                &json!({"file_path": "/etc/x", "content": ""}),
                cwd
            ),
            json!({"path": "/etc/x", "content": ""})
        );
    }

    #[test]
    fn an_edit_has_claudes_structured_patch() {
        let original = "def add(a, b):\n    return a - b\n";
        let output = ToolOutput::text("patched calc.py").with_metadata(json!({
            "path": "calc.py", "file_path": "/w/calc.py", "original": original, "crlf": false,
        }));
        let input =
            json!({"path": "calc.py", "old_string": "return a - b", "new_string": "return a + b"});
        let response = tool_response("patch_file", &input, &output, Path::new("/w"));
        assert_eq!(
            response,
            json!({
                "filePath": "/w/calc.py",
                "oldString": "return a - b",
                "newString": "return a + b",
                "originalFile": original,
                "structuredPatch": [{
                    "oldStart": 1, "oldLines": 2, "newStart": 1, "newLines": 2,
                    "lines": [" def add(a, b):", "-    return a - b", "+    return a + b"],
                }],
                "userModified": false,
                "replaceAll": false,
            })
        );
        // A failed call keeps keel's shape.
        let failed = ToolOutput::error("no such text");
        assert_eq!(
            tool_response("patch_file", &input, &failed, Path::new("/w")),
            json!({"content": "no such text", "is_error": true})
        );
    }
}
