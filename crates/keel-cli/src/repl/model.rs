//! `/model NAME`: the model from the next request on, checked against keel's catalog and the
//! provider's own model list. A doubtful name is used anyway (a gateway may serve models it
//! does not list), but never silently: the warning says what is known and how to go back.

use keel_host::report::model::{Choice, Verdict};

use super::Repl;

impl Repl {
    /// `/model NAME`: the model from the next request on. The provider's list is asked for
    /// once and kept for the session (a failed listing is asked for again next time).
    pub(super) async fn switch_model(&mut self, name: String) {
        let mut fetched = None;
        let listing = match &self.listed_models {
            Some(list) => Ok(list),
            None => fetched
                .insert(self.settings.provider.list_models().await)
                .as_ref(),
        };
        let mut engine = self.live.session().await;
        let previous = engine.model().to_owned();
        let choice = Choice {
            name: &name,
            previous: &previous,
            provider: &self.settings.provider_name,
            in_catalog: engine.catalog().get(&name).is_some(),
            listing,
        };
        let verdict = choice.verdict();
        if let Some(Ok(list)) = fetched {
            self.listed_models = Some(list);
        }
        engine.set_model(name);
        drop(engine);
        match verdict {
            Verdict::Fine(line) => self.view.notice(&line),
            Verdict::Doubtful(line) => self.view.warning(&line),
        }
    }
}
