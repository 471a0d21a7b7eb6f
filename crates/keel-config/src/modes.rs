//! Approval modes: `--approvals`' three ([`ApprovalMode`]), the five a session runs in and
//! switches between ([`LiveMode`]), and Claude Code's names for them ([`PermissionMode`]).

use serde::Deserialize;

/// Who approves gated tool calls, as `--approvals` and the config's `approvals` key say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ApprovalMode {
    /// Ask on the terminal.
    Ask,
    /// Refuse them; the model is told why.
    Deny,
    /// Allow everything.
    Allow,
}

impl ApprovalMode {
    /// The name as written in flags and files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::Deny => "deny",
            Self::Allow => "allow",
        }
    }
}

/// The approval mode a session runs in now: `--approvals`' three, and the two an interactive
/// session cycles through as well (Shift-Tab, `/mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LiveMode {
    /// Gated calls (destructive, protected) are asked about.
    Ask,
    /// Gated edits of files (`write_file`, `patch_file`) run without a question; protected
    /// paths and everything else gated are still asked about.
    AcceptEdits,
    /// Every call that may change something is refused, whatever rules and hooks say.
    ReadOnly,
    /// Gated calls run (`--approvals allow`).
    Allow,
    /// Gated calls are refused (`--approvals deny`).
    Deny,
}

impl LiveMode {
    /// Every mode, in the order `/mode` lists them.
    pub const ALL: [Self; 5] = [
        Self::Ask,
        Self::AcceptEdits,
        Self::ReadOnly,
        Self::Allow,
        Self::Deny,
    ];

    /// The modes Shift-Tab cycles through, in order.
    pub const CYCLE: [Self; 3] = [Self::Ask, Self::AcceptEdits, Self::ReadOnly];

    /// The mode `--approvals` asks for.
    pub fn of(mode: ApprovalMode) -> Self {
        match mode {
            ApprovalMode::Ask => Self::Ask,
            ApprovalMode::Allow => Self::Allow,
            ApprovalMode::Deny => Self::Deny,
        }
    }

    /// Its name, as `/mode` takes it and the banner shows it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ask => "ask",
            Self::AcceptEdits => "accept-edits",
            Self::ReadOnly => "read-only",
            Self::Allow => "allow",
            Self::Deny => "deny",
        }
    }

    /// The mode called `name` (one of [`Self::ALL`]'s names).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }

    /// The mode after this one in [`Self::CYCLE`]; from `allow` or `deny`, `ask`.
    pub fn next(self) -> Self {
        match self {
            Self::Ask => Self::AcceptEdits,
            Self::AcceptEdits => Self::ReadOnly,
            Self::ReadOnly | Self::Allow | Self::Deny => Self::Ask,
        }
    }

    /// What the mode does, in a few words.
    pub fn meaning(self) -> &'static str {
        match self {
            Self::Ask => "risky calls are asked about",
            Self::AcceptEdits => {
                "file edits run without a question; other risky calls are asked about"
            }
            Self::ReadOnly => "every call that may change something is refused",
            Self::Allow => "every call runs without a question",
            Self::Deny => "risky calls are refused",
        }
    }

    /// Claude Code's name of the mode (`default`, `acceptEdits`, …), as hooks read it in
    /// `permission_mode`.
    pub fn claude_name(self) -> &'static str {
        PermissionMode::of(self).name()
    }
}

/// `--permission-mode`: Claude Code's names for keel's approval modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[cfg_attr(feature = "clap", value(rename_all = "verbatim"))]
pub enum PermissionMode {
    /// Gated calls are asked about (with `--permission-prompt-tool stdio`, the program is
    /// asked; otherwise they are denied).
    #[cfg_attr(feature = "clap", value(name = "default"))]
    Default,
    /// File edits run; other gated calls as in `default`.
    #[cfg_attr(feature = "clap", value(name = "acceptEdits"))]
    AcceptEdits,
    /// Nothing that may change anything runs (keel's read-only mode).
    #[cfg_attr(feature = "clap", value(name = "plan"))]
    Plan,
    /// Every call runs.
    #[cfg_attr(feature = "clap", value(name = "bypassPermissions"))]
    BypassPermissions,
    /// Gated calls are denied without asking.
    #[cfg_attr(feature = "clap", value(name = "dontAsk"))]
    DontAsk,
}

impl PermissionMode {
    /// Every mode, in Claude Code's order.
    pub const ALL: [Self; 5] = [
        Self::Default,
        Self::AcceptEdits,
        Self::Plan,
        Self::BypassPermissions,
        Self::DontAsk,
    ];

    /// keel's mode for it.
    pub fn live(self) -> LiveMode {
        match self {
            Self::Default => LiveMode::Ask,
            Self::AcceptEdits => LiveMode::AcceptEdits,
            Self::Plan => LiveMode::ReadOnly,
            Self::BypassPermissions => LiveMode::Allow,
            Self::DontAsk => LiveMode::Deny,
        }
    }

    /// Claude Code's mode for keel's `mode`.
    pub fn of(mode: LiveMode) -> Self {
        match mode {
            LiveMode::Ask => Self::Default,
            LiveMode::AcceptEdits => Self::AcceptEdits,
            LiveMode::ReadOnly => Self::Plan,
            LiveMode::Allow => Self::BypassPermissions,
            LiveMode::Deny => Self::DontAsk,
        }
    }

    /// Claude Code's spelling of the mode.
    pub fn name(self) -> &'static str {
        match self {
            Self::Default => "default",
            Self::AcceptEdits => "acceptEdits",
            Self::Plan => "plan",
            Self::BypassPermissions => "bypassPermissions",
            Self::DontAsk => "dontAsk",
        }
    }

    /// The mode `name` (Claude Code's spelling, exactly) names.
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|mode| mode.name() == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_round_trips_through_its_names() {
        for mode in LiveMode::ALL {
            assert_eq!(LiveMode::named(mode.name()), Some(mode));
            assert_eq!(PermissionMode::of(mode).live(), mode);
            assert_eq!(
                PermissionMode::named(mode.claude_name()).map(PermissionMode::live),
                Some(mode)
            );
        }
        assert_eq!(LiveMode::named("plan"), None);
        assert_eq!(PermissionMode::named("Default"), None);
    }

    #[test]
    fn shift_tab_cycles_ask_accept_edits_read_only() {
        assert_eq!(LiveMode::Ask.next(), LiveMode::AcceptEdits);
        assert_eq!(LiveMode::AcceptEdits.next(), LiveMode::ReadOnly);
        assert_eq!(LiveMode::ReadOnly.next(), LiveMode::Ask);
        assert_eq!(LiveMode::Allow.next(), LiveMode::Ask);
        assert_eq!(LiveMode::Deny.next(), LiveMode::Ask);
    }
}
