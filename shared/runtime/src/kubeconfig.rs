//! The Kubernetes client configuration every command loads the same way, as
//! kubectl does: `--kubeconfig`, else `$KUBECONFIG` / `~/.kube/config`, else
//! (with no context asked for) the in-cluster service account.

use std::path::{Path, PathBuf};

use kube::config::{KubeConfigOptions, Kubeconfig};

/// The configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum KubeconfigError {
    /// The named file is absent, unreadable, or not a kubeconfig.
    #[error("cannot read kubeconfig {}: {cause}; check the file, or pass another with --kubeconfig", path.display())]
    Read { path: PathBuf, cause: String },

    /// The configuration holds no usable context (or not the one asked for).
    #[error("cannot load{} from {}: {cause}; check the file, or choose one with --kubeconfig and --context", context.as_deref().map(|c| format!(" context {c:?}")).unwrap_or_default(), source_name(path.as_deref()))]
    Load { path: Option<PathBuf>, context: Option<String>, cause: String },
}

fn source_name(path: Option<&Path>) -> String {
    match path {
        Some(p) => format!("kubeconfig {}", p.display()),
        None => "the kubeconfig ($KUBECONFIG or ~/.kube/config) or the in-cluster service account".into(),
    }
}

/// Loads the configuration `kubeconfig` and `context` select.
pub async fn load(kubeconfig: Option<&Path>, context: Option<&str>) -> Result<kube::Config, KubeconfigError> {
    let options = KubeConfigOptions { context: context.map(str::to_owned), cluster: None, user: None };
    let fail = |cause: String| KubeconfigError::Load {
        path: kubeconfig.map(Path::to_path_buf),
        context: context.map(str::to_owned),
        cause,
    };
    match kubeconfig {
        Some(path) => {
            let file = Kubeconfig::read_from(path)
                .map_err(|e| KubeconfigError::Read { path: path.to_path_buf(), cause: e.to_string() })?;
            kube::Config::from_custom_kubeconfig(file, &options).await.map_err(|e| fail(e.to_string()))
        }
        None if context.is_some() => kube::Config::from_kubeconfig(&options).await.map_err(|e| fail(e.to_string())),
        None => kube::Config::infer().await.map_err(|e| fail(e.to_string())),
    }
}
