//! The mirror without custom resources, tried as `docs/mirror.md` says
//! (issue 29): `serve` with its development certificates, the fake API as
//! the cluster with its audit webhook backend pointed at `serve`'s receiver
//! (`testkit fake-api --audit-webhook-config-file`, a kubeconfig-format file
//! as kube-apiserver reads), `watch --resource`, and a change made through
//! the real `kubectl` as alice: the commit is hers.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use testkit::kubectl::Kubectl;
use testkit::process::{Running, binary};
use testkit::{free_port, sidecar};

struct Killed(Vec<Child>);

impl Drop for Killed {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn wait(what: &str, logs: &[&std::path::Path], done: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        if Instant::now() > deadline {
            let text: Vec<String> = logs
                .iter()
                .map(|p| format!("{}:\n{}", p.display(), std::fs::read_to_string(p).unwrap_or_default()))
                .collect();
            panic!("timed out waiting for {what}\n{}", text.join("\n"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn a_change_made_through_kubectl_reaches_git_with_its_author_through_the_fake_apis_audit_webhook() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let remote = d.join("history.git");
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).output().unwrap();
        assert!(out.status.success(), "git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    git(&["init", "--quiet", "--bare", "-b", "main", remote.to_str().unwrap()]);
    let (audit_port, metrics_port) = (free_port().unwrap(), free_port().unwrap());
    let serve_log = d.join("serve.log");
    let mut children = Killed(Vec::new());
    // As the docs run it, in a directory of its own: the certificates land in ./reverser-dev-certs.
    children.0.push(
        Command::new(sidecar::binary())
            .current_dir(d)
            .args(["serve", "--git-repo", "mirror-clone", "--git-remote", &format!("file://{}", remote.display())])
            .args(["--socket", "reverser.sock", "--audit-listen", &format!("127.0.0.1:{audit_port}")])
            .args(["--metrics-listen", &format!("127.0.0.1:{metrics_port}"), "--author-attribution-grace", "3s"])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&serve_log).unwrap())
            .spawn()
            .unwrap(),
    );
    wait("serve's socket", &[&serve_log], || d.join("reverser.sock").exists());

    // The API server's audit webhook file, naming serve's receiver and the development certificates.
    let certs = d.join("reverser-dev-certs");
    let webhook = d.join("audit-webhook.kubeconfig");
    std::fs::write(
        &webhook,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: reverser\n  cluster:\n    server: https://127.0.0.1:{audit_port}/audit-webhook/default\n    certificate-authority: {ca}\nusers:\n- name: apiserver\n  user:\n    client-certificate: {cert}\n    client-key: {key}\ncontexts:\n- name: default\n  context: {{cluster: reverser, user: apiserver}}\ncurrent-context: default\n",
            ca = certs.join("ca.pem").display(),
            cert = certs.join("client.pem").display(),
            key = certs.join("client-key.pem").display(),
        ),
    )
    .unwrap();
    let seed = d.join("seed.yaml");
    std::fs::write(&seed, "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n").unwrap();
    let kubeconfig = d.join("kubeconfig");
    let _api = Running::start(
        &binary("testkit", "testkit"),
        &[
            "fake-api",
            "--seed",
            seed.to_str().unwrap(),
            "--kubeconfig-out",
            kubeconfig.to_str().unwrap(),
            "--audit-webhook-config-file",
            webhook.to_str().unwrap(),
            "--audit-webhook-batch-max-wait-ms",
            "200",
        ],
    );
    let watch_log = d.join("watch.log");
    children.0.push(
        Command::new(sidecar::binary())
            .args(["watch", "--resource", "configmaps", "-n", "shop", "--commit-window", "300ms"])
            .args(["--socket", d.join("reverser.sock").to_str().unwrap(), "--kubeconfig", kubeconfig.to_str().unwrap()])
            .args(["--metrics-listen", &format!("127.0.0.1:{}", free_port().unwrap())])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&watch_log).unwrap())
            .spawn()
            .unwrap(),
    );

    // alice changes the cluster through kubectl (the fake API takes --as as Impersonate-User).
    let kubectl = Kubectl::new(&[]).kubeconfig(&kubeconfig);
    let out =
        kubectl.run(&["--as", "alice", "-n", "shop", "create", "configmap", "web", "--from-literal=greeting=hello"]);
    assert!(out.status.success(), "kubectl create configmap: {}", String::from_utf8_lossy(&out.stderr));
    let log = || {
        git(&["--git-dir", remote.to_str().unwrap(), "log", "--format=%an", "main", "--", "shop/configmaps/web.yaml"])
    };
    let landed = || {
        Command::new("git")
            .args(["--git-dir", remote.to_str().unwrap(), "cat-file", "-e", "main:shop/configmaps/web.yaml"])
            .status()
            .is_ok_and(|s| s.success())
    };
    wait("the ConfigMap in the remote", &[&serve_log, &watch_log], landed);
    assert_eq!(log().trim(), "alice", "the commit is the kubectl user's, from the fake API's audit event");
}
