use super::*;

use testkit::fixtures::{KUBECONFIG, text_file as file};

fn token(c: &kube::Config) -> Option<String> {
    use secrecy::ExposeSecret;
    c.auth_info.token.as_ref().map(|t| t.expose_secret().to_string())
}

#[tokio::test]
async fn flags_override_the_kubeconfig_as_kubectls_do() {
    let f = file(KUBECONFIG);
    let plain = load_with(Some(f.path()), &Overrides::default()).await.unwrap();
    assert_eq!(plain.cluster_url.to_string(), "https://127.0.0.1:6443/");
    assert_eq!(token(&plain).as_deref(), Some("abc"));
    assert!(plain.auth_info.impersonate.is_none());

    let o = Overrides { cluster: Some("prod".into()), user: Some("robot".into()), ..Overrides::default() };
    let c = load_with(Some(f.path()), &o).await.unwrap();
    assert_eq!(c.cluster_url.to_string(), "https://10.0.0.1:6443/");
    assert!(c.auth_info.exec.is_some() && token(&c).is_none());
    assert_eq!(c.default_namespace, "shop", "the context's namespace stays");

    let o = Overrides {
        user: Some("robot".into()),
        server: Some("127.0.0.2:7443".into()),
        token: Some("xyz".into()),
        insecure_skip_tls_verify: true,
        impersonate: Some("alice".into()),
        impersonate_groups: vec!["devs".into(), "ops".into()],
        ..Overrides::default()
    };
    let c = load_with(Some(f.path()), &o).await.unwrap();
    assert_eq!(c.cluster_url.to_string(), "https://127.0.0.2:7443/");
    assert_eq!(token(&c).as_deref(), Some("xyz"));
    assert!(c.auth_info.exec.is_none(), "--token replaces the exec credential");
    assert!(c.accept_invalid_certs);
    assert_eq!(c.auth_info.impersonate.as_deref(), Some("alice"));
    assert_eq!(c.auth_info.impersonate_groups, Some(vec!["devs".to_string(), "ops".to_string()]));

    let ca = file("not checked until the client is built");
    let o = Overrides { certificate_authority: Some(ca.path().to_path_buf()), ..Overrides::default() };
    let c = load_with(Some(f.path()), &o).await.unwrap();
    assert_eq!(c.root_cert_file.as_deref(), Some(ca.path()));
}

#[tokio::test]
async fn a_bad_override_says_which_flag() {
    let f = file(KUBECONFIG);
    let e = load_with(Some(f.path()), &Overrides { cluster: Some("staging".into()), ..Overrides::default() })
        .await
        .unwrap_err();
    assert!(e.to_string().contains("staging"), "{e}");
    let e = load_with(
        Some(f.path()),
        &Overrides { certificate_authority: Some("/nonexistent/ca.pem".into()), ..Overrides::default() },
    )
    .await
    .unwrap_err();
    assert!(e.to_string().starts_with("--certificate-authority \"/nonexistent/ca.pem\": "), "{e}");
    let e = load_with(Some(f.path()), &Overrides { server: Some("http://".into()), ..Overrides::default() })
        .await
        .unwrap_err();
    assert!(e.to_string().starts_with("--server \"http://\""), "{e}");
}

#[tokio::test]
async fn server_alone_needs_no_usable_context() {
    let empty = file("apiVersion: v1\nkind: Config\n");
    let o = Overrides { server: Some("https://10.9.8.7:6443".into()), token: Some("t".into()), ..Overrides::default() };
    let c = load_with(Some(empty.path()), &o).await.unwrap();
    assert_eq!(c.cluster_url.to_string(), "https://10.9.8.7:6443/");
    assert_eq!(c.default_namespace, "default");
}

#[tokio::test]
async fn a_missing_file_is_named_once() {
    let e = load(Some(Path::new("/nonexistent/kubeconfig")), None).await.unwrap_err().to_string();
    assert_eq!(e.matches("/nonexistent/kubeconfig").count(), 1, "{e}");
    assert_eq!(e.matches("os error").count(), 1, "{e}");
}
