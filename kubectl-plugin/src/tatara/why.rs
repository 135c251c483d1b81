//! `kubectl tatara why TASK|ISSUE|MR`: why a Task is stuck, or who works an
//! Issue or merge request, in the operator's own terms (`rules::ownership::why`):
//! the park reason and its unpark class, what releases it and what would
//! decline the release now, the clocks, the QueuedEvent admission it waits
//! on, and who owns what. Reads only: Tasks, Issues, MergeRequests, Projects
//! and QueuedEvents of one namespace.

use std::io::Write;

use k8s_openapi::jiff::Timestamp;
use kube::Api;
use rules::ownership::types::{Project, QueuedEvent};
use rules::ownership::why::{self, ArtifactWhy, Inputs, ParkWhy, TaskWhy};
use runtime::ownership::executor::Executor;
use serde::Serialize;

use super::owners::{Found, find, kind_name};
use crate::common::{self, Call, CliError, Human, KubeArgs, Offers, OutputArgs, Paint, Style};

/// The flags of `kubectl tatara why`.
#[derive(Debug, Clone, clap::Args)]
#[command(after_help = "Examples:\n  kubectl tatara why task/mt-i-tatara-operator-412 -n tatara\n  \
                  kubectl tatara why tatara-operator#412\n  kubectl tatara why 'tatara-operator!9' -o json\n\n\
                  For an Issue or merge request it says which Task works it (the sweep's live-owner \
                  resolution) and then why that Task is where it is. Nothing is written.")]
pub struct Args {
    /// The object: a Task by name, an Issue or MergeRequest by name or by
    /// its natural key (REPO#NUMBER, REPO!NUMBER); prefix task/, issue/ or
    /// mr/ to pick the kind when names collide.
    #[arg(value_name = "TASK|ISSUE|MR")]
    pub target: String,
    #[command(flatten)]
    pub kube: KubeArgs,
    #[command(flatten)]
    pub output: OutputArgs<false, false>,
}

/// What `why` prints.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Why {
    Task(TaskWhy),
    Artifact(ArtifactWhy),
}

fn label(style: &Style, text: &str) -> String {
    Paint::Dim.paint(&format!("{text:<12}"), style.colour)
}

fn render_park(p: &ParkWhy, style: &Style, indent: &str, out: &mut dyn Write) -> std::io::Result<()> {
    let class = p.class.map_or("unclassified", |c| c.label());
    let since = p.parked_at.as_deref().map(|t| format!(" since {t}")).unwrap_or_default();
    let reason = Paint::Yellow.paint(&p.reason, style.colour);
    writeln!(out, "{indent}{}{reason} (unpark: {class}){since}", label(style, "parked:"))?;
    writeln!(out, "{indent}{}{}", label(style, "released:"), p.releases)?;
    for h in &p.held_by {
        writeln!(out, "{indent}{}{}", label(style, "held:"), Paint::Red.paint(h, style.colour))?;
    }
    for c in &p.clocks {
        writeln!(out, "{indent}{}{} at {} ({})", label(style, "clock:"), c.what, c.at, why::relative(c.in_seconds))?;
    }
    Ok(())
}

fn render_task(t: &TaskWhy, style: &Style, indent: &str, out: &mut dyn Write) -> std::io::Result<()> {
    let kind = t.task_kind.as_deref().map(|k| format!(", kind {k}")).unwrap_or_default();
    writeln!(out, "{indent}Task/{} (project {}{kind})", t.name, t.project)?;
    let inner = format!("{indent}  ");
    writeln!(out, "{inner}{}{}", label(style, "why:"), t.summary)?;
    writeln!(out, "{inner}{}{}", label(style, "state:"), t.state)?;
    if let Some(p) = &t.park {
        render_park(p, style, &inner, out)?;
    }
    for a in &t.admission {
        writeln!(
            out,
            "{inner}{}{} ({} pool, priority {}, seq {}, {}): {}",
            label(style, "admission:"),
            a.queued_event,
            a.class,
            a.priority,
            a.seq,
            a.state,
            a.why
        )?;
    }
    for o in &t.owns {
        let state = o.state.as_deref().unwrap_or("-");
        let reference = if o.controller { "controller" } else { "named, not controller" };
        writeln!(
            out,
            "{inner}{}{}/{} {} {state}, {reference}",
            label(style, "owns:"),
            kind_name(o.kind),
            o.name,
            o.key
        )?;
    }
    Ok(())
}

impl Human for Why {
    fn render(&self, style: &Style, out: &mut dyn Write) -> std::io::Result<()> {
        match self {
            Why::Task(t) => render_task(t, style, "", out),
            Why::Artifact(a) => {
                let state = a.state.as_deref().unwrap_or("-");
                writeln!(out, "{}/{} {} ({state})", kind_name(a.kind), a.name, a.key)?;
                writeln!(out, "  {}{}", label(style, "why:"), a.summary)?;
                if let Some(c) = &a.controller {
                    writeln!(out, "  {}{c}", label(style, "controller:"))?;
                }
                if let Some(o) = &a.ownership {
                    writeln!(out, "  {}{o}", label(style, "ownership:"))?;
                }
                if let Some(t) = &a.owner {
                    render_task(t, style, "  ", out)?;
                }
                Ok(())
            }
        }
    }
}

/// Every object of `T` in `namespace`; a kind the cluster does not serve
/// (its CRD not installed) reads as none.
async fn list_all<T>(client: &kube::Client, namespace: &str, resource: &str) -> Result<Vec<T>, CliError>
where
    T: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
    T: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match Api::<T>::namespaced(client.clone(), namespace).list(&Default::default()).await {
        Ok(l) => Ok(l.items),
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(vec![]),
        Err(e) => Err(common::api_failure(Call { verb: "list", resource, name: "", namespace }, &e)),
    }
}

/// Runs `kubectl tatara why`.
pub async fn run(args: &Args, colour: bool, out: &mut dyn Write) -> Result<(), CliError> {
    args.output.check("why", Offers::default())?;
    let target = args.kube.client().await?;
    let ns = &target.namespace;
    let snap =
        Executor::new(target.client.clone(), ns).snapshot().await.map_err(|e| common::executor_failure(e, ns))?;
    let found = find(&snap, &args.target).map_err(|e| e.error(ns))?;
    let projects: Vec<Project> = list_all(&target.client, ns, "projects.tatara.dev").await?;
    let queued: Vec<QueuedEvent> = list_all(&target.client, ns, "queuedevents.tatara.dev").await?;
    let inputs = Inputs { snap: &snap, projects: &projects, queued: &queued, now: Timestamp::now() };
    let answer = match found {
        Found::Task(t) => Why::Task(why::task(&inputs, t)),
        Found::Artifact(a) => Why::Artifact(why::artifact(&inputs, &a)),
    };
    common::print(&args.output, colour, &answer, out)
}
