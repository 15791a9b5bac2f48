//! The plan: a DAG of steps.
//!
//! Step ids are slugs of step names; dependencies are given by name or id. A plan is refused
//! when two steps share an id, a dependency names no step, or the dependencies form a cycle
//! (the error names the cycle, `a -> b -> a`, following `depends_on` edges).
//!
//! ## Step states
//!
//! | from \ to | active          | done                       | failed |
//! |-----------|-----------------|----------------------------|--------|
//! | pending   | deps done       | deps done                  | yes    |
//! | active    | yes (no change) | yes                        | yes    |
//! | failed    | deps done       | deps done                  | yes (no change) |
//! | done      | no              | yes (output replaced)      | no     |
//!
//! **Completing a step whose dependencies are not done is refused** (`[plan.not_ready]`, naming
//! the steps it waits for); upstream allows it, but a DAG whose order the agent may ignore
//! gives readers of the plan a false picture. Completing a done step again is allowed and
//! replaces its output, because `complete_step` is idempotent and may be retried. A done step
//! never goes back.

use std::collections::HashMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::extension::{ExtraFields, Plan, Step, StepState};

/// One step as `create_plan` receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlanStepArgs {
    pub name: String,
    pub description: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanError {
    DuplicateStep(String),
    UnknownDependency {
        step: String,
        dependency: String,
    },
    Cycle(Vec<String>),
    Missing,
    UnknownStep(String),
    NotReady {
        step: String,
        waiting_on: Vec<String>,
    },
    InvalidTransition {
        step: String,
        from: StepState,
        to: StepState,
    },
}

impl PlanError {
    /// The error code the model sees in `[code] message`.
    pub fn code(&self) -> &'static str {
        match self {
            PlanError::DuplicateStep(_)
            | PlanError::UnknownDependency { .. }
            | PlanError::Cycle(_) => "plan.cycle",
            PlanError::Missing => "plan.missing",
            PlanError::UnknownStep(_) => "plan.unknown_step",
            PlanError::NotReady { .. } => "plan.not_ready",
            PlanError::InvalidTransition { .. } => "plan.invalid_transition",
        }
    }
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PlanError::DuplicateStep(id) => write!(f, "duplicate step id: {id}"),
            PlanError::UnknownDependency { step, dependency } => {
                write!(f, "step {step} depends on an unknown step: {dependency}")
            }
            PlanError::Cycle(path) => write!(f, "plan has a cycle: {}", path.join(" -> ")),
            PlanError::Missing => f.write_str("no plan; call create_plan first"),
            PlanError::UnknownStep(step) => write!(f, "no such step: {step}"),
            PlanError::NotReady { step, waiting_on } => write!(
                f,
                "step {step} cannot complete before the steps it depends on are done: {}",
                waiting_on.join(", ")
            ),
            PlanError::InvalidTransition { step, from, to } => {
                write!(f, "step {step} cannot go from {from} to {to}")
            }
        }
    }
}

impl std::error::Error for PlanError {}

/// Lowercase, every run of characters outside `[a-z0-9]` becomes `-`, trimmed of `-`;
/// `step` when nothing is left.
pub fn slug(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut pending_dash = false;
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            if pending_dash && !out.is_empty() {
                out.push('-');
            }
            pending_dash = false;
            out.push(c);
        } else {
            pending_dash = true;
        }
    }
    if out.is_empty() {
        "step".to_owned()
    } else {
        out
    }
}

/// Builds and validates the plan `create_plan` describes.
pub fn build(args: &[PlanStepArgs]) -> Result<Plan, PlanError> {
    let ids: Vec<String> = args.iter().map(|s| slug(&s.name)).collect();
    let by_name: HashMap<&str, &str> = args
        .iter()
        .zip(&ids)
        .map(|(s, id)| (s.name.as_str(), id.as_str()))
        .collect();
    let known: HashMap<&str, ()> = ids.iter().map(|id| (id.as_str(), ())).collect();
    let resolve = |dep: &str| -> String {
        if let Some(id) = by_name.get(dep) {
            (*id).to_owned()
        } else if known.contains_key(dep) {
            dep.to_owned()
        } else {
            // Not a name and not an id: its slug may still name a step ("gather facts").
            // If not, validation below reports the dependency as the caller wrote it.
            let s = slug(dep);
            if known.contains_key(s.as_str()) {
                s
            } else {
                dep.to_owned()
            }
        }
    };
    let steps = args
        .iter()
        .zip(&ids)
        .map(|(s, id)| Step {
            id: id.clone(),
            name: s.name.clone(),
            description: s.description.clone(),
            depends_on: s.depends_on.iter().map(|d| resolve(d)).collect(),
            output: None,
            linked_tasks: Vec::new(),
            state: StepState::Pending,
            extra: ExtraFields::new(),
        })
        .collect();
    let plan = Plan {
        steps,
        extra: ExtraFields::new(),
    };
    validate(&plan)?;
    Ok(plan)
}

/// Duplicate ids, then dangling dependencies, then cycles.
pub fn validate(plan: &Plan) -> Result<(), PlanError> {
    let mut index: HashMap<&str, usize> = HashMap::with_capacity(plan.steps.len());
    for (i, step) in plan.steps.iter().enumerate() {
        if index.insert(step.id.as_str(), i).is_some() {
            return Err(PlanError::DuplicateStep(step.id.clone()));
        }
    }
    let mut edges: Vec<Vec<usize>> = Vec::with_capacity(plan.steps.len());
    for step in &plan.steps {
        let mut out = Vec::with_capacity(step.depends_on.len());
        for dep in &step.depends_on {
            match index.get(dep.as_str()) {
                Some(&j) => out.push(j),
                None => {
                    return Err(PlanError::UnknownDependency {
                        step: step.id.clone(),
                        dependency: dep.clone(),
                    });
                }
            }
        }
        edges.push(out);
    }
    match find_cycle(&edges) {
        Some(cycle) => Err(PlanError::Cycle(
            cycle
                .into_iter()
                .map(|i| plan.steps[i].id.clone())
                .collect(),
        )),
        None => Ok(()),
    }
}

/// Iterative depth-first search (plans may be deep), in step order. Returns the first cycle
/// met as a closed path of indices (`[a, b, a]`).
fn find_cycle(edges: &[Vec<usize>]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Finished,
    }
    let mut mark = vec![Mark::New; edges.len()];
    let mut path: Vec<(usize, usize)> = Vec::new();
    for root in 0..edges.len() {
        if mark[root] != Mark::New {
            continue;
        }
        mark[root] = Mark::OnPath;
        path.push((root, 0));
        while let Some(&mut (node, ref mut next)) = path.last_mut() {
            if let Some(&dep) = edges[node].get(*next) {
                *next += 1;
                match mark[dep] {
                    Mark::New => {
                        mark[dep] = Mark::OnPath;
                        path.push((dep, 0));
                    }
                    Mark::OnPath => {
                        let start = path.iter().position(|&(n, _)| n == dep).unwrap_or(0);
                        let mut cycle: Vec<usize> = path[start..].iter().map(|&(n, _)| n).collect();
                        cycle.push(dep);
                        return Some(cycle);
                    }
                    Mark::Finished => {}
                }
            } else {
                mark[node] = Mark::Finished;
                path.pop();
            }
        }
    }
    None
}

impl Plan {
    /// The index of the step named by `key`: its id, or the slug of its name.
    pub fn find(&self, key: &str) -> Option<usize> {
        self.steps.iter().position(|s| s.id == key).or_else(|| {
            let s = slug(key);
            self.steps.iter().position(|step| step.id == s)
        })
    }

    pub fn step(&self, key: &str) -> Result<&Step, PlanError> {
        self.find(key)
            .map(|i| &self.steps[i])
            .ok_or_else(|| PlanError::UnknownStep(key.to_owned()))
    }

    /// Ids of the dependencies of step `index` that are not done, in `depends_on` order.
    pub fn waiting_on(&self, index: usize) -> Vec<String> {
        self.steps[index]
            .depends_on
            .iter()
            .filter(|dep| {
                !self
                    .steps
                    .iter()
                    .any(|s| &s.id == *dep && s.state == StepState::Done)
            })
            .cloned()
            .collect()
    }

    /// Pending steps whose dependencies are all done.
    pub fn ready(&self) -> Vec<&Step> {
        let done: HashMap<&str, bool> = self
            .steps
            .iter()
            .map(|s| (s.id.as_str(), s.state == StepState::Done))
            .collect();
        self.steps
            .iter()
            .filter(|s| {
                s.state == StepState::Pending
                    && s.depends_on
                        .iter()
                        .all(|d| done.get(d.as_str()).copied().unwrap_or(false))
            })
            .collect()
    }

    /// Steps not yet finished: pending and active.
    pub fn unresolved(&self) -> Vec<&Step> {
        self.steps
            .iter()
            .filter(|s| matches!(s.state, StepState::Pending | StepState::Active))
            .collect()
    }

    /// Moves the step named by `key` to `to` under the rules of the module's table.
    pub fn transition(&mut self, key: &str, to: StepState) -> Result<&mut Step, PlanError> {
        let index = self
            .find(key)
            .ok_or_else(|| PlanError::UnknownStep(key.to_owned()))?;
        let from = self.steps[index].state;
        use StepState::*;
        let needs_dependencies = match (from, to) {
            (Pending | Failed, Active | Done) => true,
            (Active, Active | Done | Failed)
            | (Pending, Failed)
            | (Failed, Failed)
            | (Done, Done) => false,
            _ => {
                return Err(PlanError::InvalidTransition {
                    step: self.steps[index].id.clone(),
                    from,
                    to,
                });
            }
        };
        if needs_dependencies {
            let waiting_on = self.waiting_on(index);
            if !waiting_on.is_empty() {
                return Err(PlanError::NotReady {
                    step: self.steps[index].id.clone(),
                    waiting_on,
                });
            }
        }
        let step = &mut self.steps[index];
        step.state = to;
        Ok(step)
    }

    /// `complete_step`: the step becomes done with `output`.
    pub fn complete(&mut self, key: &str, output: &str) -> Result<&Step, PlanError> {
        let step = self.transition(key, StepState::Done)?;
        step.output = Some(output.to_owned());
        Ok(step)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn args(specs: &[(&str, &[&str])]) -> Vec<PlanStepArgs> {
        specs
            .iter()
            .map(|(name, deps)| PlanStepArgs {
                name: (*name).to_owned(),
                description: format!("{name} description"),
                depends_on: deps.iter().map(|d| (*d).to_owned()).collect(),
            })
            .collect()
    }

    #[test]
    fn slugs() {
        assert_eq!(slug("Gather facts"), "gather-facts");
        assert_eq!(slug("  --Hello, World!!  "), "hello-world");
        assert_eq!(slug("Step 2: ship v1.0"), "step-2-ship-v1-0");
        assert_eq!(slug("???"), "step");
        assert_eq!(slug(""), "step");
        assert_eq!(slug("Ärger über Öl"), "rger-ber-l");
        assert_eq!(slug("ALLCAPS"), "allcaps");
    }

    #[test]
    fn the_pinned_upstream_plan() {
        let plan = build(&args(&[
            ("Gather facts", &[]),
            ("Decide", &["Gather facts"]),
        ]))
        .expect("valid");
        let ids: Vec<_> = plan.steps.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["gather-facts", "decide"]);
        assert_eq!(plan.steps[1].depends_on, ["gather-facts"]);
        assert!(
            plan.steps
                .iter()
                .all(|s| s.state == StepState::Pending && s.output.is_none())
        );
    }

    #[test]
    fn dependencies_by_name_id_or_slug() {
        let plan = build(&args(&[
            ("Gather facts", &[]),
            ("Check ledger", &[]),
            ("Decide", &["Gather facts", "check-ledger"]),
            ("Ship", &["decide"]),
            ("Close", &["SHIP"]),
        ]))
        .expect("valid");
        assert_eq!(plan.steps[2].depends_on, ["gather-facts", "check-ledger"]);
        assert_eq!(plan.steps[3].depends_on, ["decide"]);
        assert_eq!(plan.steps[4].depends_on, ["ship"]);
    }

    #[test]
    fn refusals_with_their_codes_and_texts() {
        let cases: Vec<(Vec<PlanStepArgs>, &str, &str)> = vec![
            (
                args(&[("A b", &[]), ("a-B", &[])]),
                "plan.cycle",
                "duplicate step id: a-b",
            ),
            (
                args(&[("A", &["Nowhere"])]),
                "plan.cycle",
                "step a depends on an unknown step: Nowhere",
            ),
            (
                args(&[("A", &["B"]), ("B", &["A"])]),
                "plan.cycle",
                "plan has a cycle: a -> b -> a",
            ),
            (
                args(&[("A", &["A"])]),
                "plan.cycle",
                "plan has a cycle: a -> a",
            ),
            (
                args(&[
                    ("Start", &[]),
                    ("A", &["Start", "C"]),
                    ("B", &["A"]),
                    ("C", &["B"]),
                ]),
                "plan.cycle",
                "plan has a cycle: a -> c -> b -> a",
            ),
        ];
        for (steps, code, text) in cases {
            let err = build(&steps).expect_err("refused");
            assert_eq!((err.code(), err.to_string().as_str()), (code, text));
        }
    }

    #[test]
    fn ready_and_unresolved_follow_dependencies() {
        let mut plan = build(&args(&[
            ("A", &[]),
            ("B", &["A"]),
            ("C", &["A"]),
            ("D", &["B", "C"]),
        ]))
        .expect("valid");
        let ids = |steps: Vec<&Step>| steps.iter().map(|s| s.id.clone()).collect::<Vec<_>>();
        assert_eq!(ids(plan.ready()), ["a"]);
        plan.complete("A", "done a").expect("a is ready");
        assert_eq!(ids(plan.ready()), ["b", "c"]);
        plan.transition("b", StepState::Active).expect("b is ready");
        assert_eq!(ids(plan.ready()), ["c"]);
        assert_eq!(ids(plan.unresolved()), ["b", "c", "d"]);
        plan.complete("b", "done b").expect("b is active");
        plan.complete("c", "done c").expect("c is ready");
        assert_eq!(ids(plan.ready()), ["d"]);
        plan.complete("d", "done d").expect("d is ready");
        assert!(plan.unresolved().is_empty() && plan.ready().is_empty());
    }

    #[test]
    fn completing_before_dependencies_is_refused() {
        let mut plan = build(&args(&[("A", &[]), ("B", &[]), ("C", &["A", "B"])])).expect("valid");
        plan.complete("a", "x").expect("ready");
        let err = plan.complete("C", "too early").expect_err("waits for b");
        assert_eq!(err.code(), "plan.not_ready");
        assert_eq!(
            err.to_string(),
            "step c cannot complete before the steps it depends on are done: b"
        );
        assert_eq!(plan.steps[2].state, StepState::Pending);
        assert_eq!(plan.steps[2].output, None);
    }

    #[test]
    fn the_transition_table() {
        use StepState::*;
        let all = [Pending, Active, Done, Failed];
        let allowed = |from: StepState, to: StepState| {
            matches!(
                (from, to),
                (Pending, Active | Done | Failed)
                    | (Active, Active | Done | Failed)
                    | (Failed, Active | Done | Failed)
                    | (Done, Done)
            )
        };
        for from in all {
            for to in all {
                let mut plan = build(&args(&[("A", &[])])).expect("valid");
                plan.steps[0].state = from;
                let got = plan.transition("a", to).map(|s| s.state);
                if allowed(from, to) {
                    assert_eq!(got, Ok(to), "{from} -> {to}");
                } else {
                    assert_eq!(
                        got,
                        Err(PlanError::InvalidTransition {
                            step: "a".into(),
                            from,
                            to
                        }),
                        "{from} -> {to}"
                    );
                    assert_eq!(plan.steps[0].state, from);
                }
            }
        }
    }

    #[test]
    fn recompleting_replaces_the_output() {
        let mut plan = build(&args(&[("A", &[])])).expect("valid");
        plan.complete("A", "first").expect("ready");
        let step = plan.complete("a", "second").expect("idempotent");
        assert_eq!(step.output.as_deref(), Some("second"));
    }

    #[test]
    fn unknown_steps() {
        let mut plan = build(&args(&[("A", &[])])).expect("valid");
        let err = plan.complete("Zed", "x").expect_err("unknown");
        assert_eq!(
            (err.code(), err.to_string()),
            ("plan.unknown_step", "no such step: Zed".to_owned())
        );
        assert_eq!(
            plan.step("nope").expect_err("unknown"),
            PlanError::UnknownStep("nope".into())
        );
    }

    #[test]
    fn a_deep_chain_does_not_overflow_the_stack() {
        let n = 50_000;
        let steps: Vec<Step> = (0..n)
            .map(|i| Step {
                id: format!("s{i}"),
                name: format!("s{i}"),
                description: String::new(),
                depends_on: if i + 1 < n {
                    vec![format!("s{}", i + 1)]
                } else {
                    vec!["s0".into()]
                },
                output: None,
                linked_tasks: vec![],
                state: StepState::Pending,
                extra: ExtraFields::new(),
            })
            .collect();
        match validate(&Plan {
            steps,
            extra: ExtraFields::new(),
        }) {
            Err(PlanError::Cycle(path)) => assert_eq!(path.len(), n + 1),
            other => panic!("expected the long cycle, got {other:?}"),
        }
    }

    /// An independent oracle: Kahn's algorithm finds a topological order iff there is one.
    fn has_topological_order(n: usize, edges: &[(usize, usize)]) -> bool {
        let mut indegree = vec![0usize; n];
        let mut out = vec![Vec::new(); n];
        for &(from, to) in edges {
            out[to].push(from);
            indegree[from] += 1;
        }
        let mut queue: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut seen = 0;
        while let Some(i) = queue.pop() {
            seen += 1;
            for &j in &out[i] {
                indegree[j] -= 1;
                if indegree[j] == 0 {
                    queue.push(j);
                }
            }
        }
        seen == n
    }

    fn graph() -> impl Strategy<Value = (usize, Vec<(usize, usize)>)> {
        (1usize..24).prop_flat_map(|n| (Just(n), proptest::collection::vec((0..n, 0..n), 0..n * 3)))
    }

    proptest! {
        #[test]
        fn accepted_iff_a_topological_order_exists((n, edges) in graph()) {
            let mut specs: Vec<PlanStepArgs> = (0..n)
                .map(|i| PlanStepArgs { name: format!("Step {i}"), description: String::new(), depends_on: vec![] })
                .collect();
            for &(from, to) in &edges {
                let dep = format!("step-{to}");
                if !specs[from].depends_on.contains(&dep) {
                    specs[from].depends_on.push(dep);
                }
            }
            let result = build(&specs);
            prop_assert_eq!(result.is_ok(), has_topological_order(n, &edges));
            if let Err(PlanError::Cycle(path)) = result {
                // The reported cycle is real: closed, simple, and every hop is a dependency.
                prop_assert!(path.len() >= 2);
                prop_assert_eq!(path.first(), path.last());
                let inner = &path[..path.len() - 1];
                let distinct: std::collections::HashSet<_> = inner.iter().collect();
                prop_assert_eq!(distinct.len(), inner.len());
                for hop in path.windows(2) {
                    let from: usize = hop[0].trim_start_matches("step-").parse().expect("id");
                    prop_assert!(specs[from].depends_on.contains(&hop[1]), "{} -> {}", hop[0], hop[1]);
                }
            } else if let Err(other) = result {
                prop_assert!(false, "only cycles can go wrong here: {other}");
            }
        }

        #[test]
        fn slugs_are_well_formed(name in "\\PC{0,40}") {
            let s = slug(&name);
            prop_assert!(!s.is_empty());
            prop_assert!(s.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-'));
            prop_assert!(!s.starts_with('-') && !s.ends_with('-') && !s.contains("--"));
            prop_assert_eq!(slug(&s), s.clone());
        }
    }
}
