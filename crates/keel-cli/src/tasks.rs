//! Background tasks in the CLI: the store under `$KEEL_HOME`, the runners from the config,
//! `keel tasks ...` (after recovery, through `keel::open_task_store`), and the hidden
//! `keel task-run <id>` supervisor.

use std::io::{Read, Seek, Write};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use keel::tasks::{
    self as tasks, SqliteTaskStore, TaskRecord, TaskStore, describe, detach, supervise,
};
use keel_host::report::delegates::task_line;

use crate::error::CliError;
use keel_config::keel_home;

/// The task store, `$KEEL_HOME/tasks.db`.
pub(crate) fn open_store(keel_home: &Path) -> Result<Arc<dyn TaskStore>, CliError> {
    let store = SqliteTaskStore::open(&keel::Home(keel_home).tasks_db())
        .map_err(|err| CliError::Run(err.to_string()))?;
    Ok(Arc::new(store))
}

/// `keel task-run <id>`: the detached supervisor of one task.
pub(crate) async fn task_run(id: &str) -> Result<u8, CliError> {
    // A session of its own: the launcher and its terminal may go away.
    if let Err(err) = detach() {
        tracing::debug!("setsid: {err}");
    }
    let home = keel_home()?;
    let store = open_store(&home)?;
    // The runner is the command line recorded with the task: no config is read here.
    let record = supervise(store.as_ref(), id, std::process::id())
        .await
        .map_err(|err| match err {
            tasks::TaskError::NotFound { .. } => CliError::Usage(format!("no task {id:?}")),
            err => CliError::Run(err.to_string()),
        })?;
    Ok(u8::from(
        record.status != keel::tasks::TaskStatus::Completed,
    ))
}

/// `keel tasks` and its actions.
pub(crate) async fn command(action: Option<crate::cli::TasksAction>) -> Result<u8, CliError> {
    use crate::cli::TasksAction;
    let home = keel_home()?;
    // Tasks whose supervisor died are shown interrupted, not running.
    let store = keel::open_task_store(&home).map_err(|err| CliError::Run(err.to_string()))?;
    let run = |err: keel::tasks::TaskError| CliError::Run(err.to_string());
    let get = |id: &str| -> Result<TaskRecord, CliError> {
        store
            .get(id)
            .map_err(run)?
            .ok_or_else(|| CliError::Usage(format!("no task {id:?}; `keel tasks` lists them")))
    };
    let write = |text: &str| {
        let _ = writeln!(std::io::stdout().lock(), "{text}");
    };
    match action {
        None => {
            let records = store.list(50).map_err(run)?;
            if records.is_empty() {
                write("no tasks yet; the model starts them with start_task");
            }
            for record in &records {
                write(&task_line(record));
            }
        }
        Some(TasksAction::Show { id, .. }) => {
            let record = get(&id)?;
            write(&describe(&record));
            if !record.output_tail.is_empty() {
                write("--- output (last lines) ---");
                write(&record.output_tail);
            }
            if !record.error_tail.is_empty() {
                write("--- errors (last lines) ---");
                write(&record.error_tail);
            }
        }
        Some(TasksAction::Cancel { id, .. }) => {
            let record = tasks::cancel(store.as_ref(), &id)
                .map_err(|err| CliError::Usage(err.to_string()))?;
            write(&format!("task {} cancelled", record.id));
        }
        Some(TasksAction::Logs { id, follow, .. }) => {
            logs(&get(&id)?, follow, store.as_ref()).await?;
        }
    }
    Ok(0)
}

/// Prints a task's log; with `follow`, goes on printing what is added until the task ends.
async fn logs(record: &TaskRecord, follow: bool, store: &dyn TaskStore) -> Result<(), CliError> {
    let io =
        |err: std::io::Error| CliError::Run(format!("{}: {err}", record.output_path.display()));
    let mut out = std::io::stdout().lock();
    let mut offset = 0u64;
    loop {
        match std::fs::File::open(&record.output_path) {
            Ok(mut file) => {
                file.seek(std::io::SeekFrom::Start(offset)).map_err(io)?;
                let mut chunk = Vec::new();
                file.read_to_end(&mut chunk).map_err(io)?;
                offset += chunk.len() as u64;
                out.write_all(&chunk).map_err(io)?;
                out.flush().map_err(io)?;
            }
            Err(err) if err.kind() == std::io::ErrorKind::NotFound && follow => {}
            Err(err) => return Err(io(err)),
        }
        if !follow {
            return Ok(());
        }
        let ended = store
            .get(&record.id)
            .map_err(|err| CliError::Run(err.to_string()))?
            .is_none_or(|now| now.status.is_terminal());
        if ended {
            // One last read picks up what came with the end.
            if let Ok(mut file) = std::fs::File::open(&record.output_path) {
                let _ = file.seek(std::io::SeekFrom::Start(offset));
                let mut rest = Vec::new();
                let _ = file.read_to_end(&mut rest);
                let _ = out.write_all(&rest);
            }
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}
