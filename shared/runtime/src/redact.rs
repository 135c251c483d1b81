//! URLs fit for logs, banners and errors: a password in the userinfo is
//! replaced, the user name is kept (it says which account, and is no secret).

/// `scheme://user:***@host/path` for `scheme://user:secret@host/path`;
/// `scheme://***@host` for a userinfo that is only a token; any other URL
/// unchanged.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    let (authority, path) = rest.split_at(authority_end);
    match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{scheme}://{user}:***@{host}{path}"),
            // A bare userinfo is how tokens are passed (https://TOKEN@host).
            None => format!("{scheme}://***@{host}{path}"),
        },
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn hides_passwords_and_bare_tokens_keeps_the_rest() {
        assert_eq!(redact_url("redis://:s3cret@r:6379/0"), "redis://:***@r:6379/0");
        assert_eq!(redact_url("rediss://default:s3cret@r:6380"), "rediss://default:***@r:6380");
        assert_eq!(
            redact_url("https://x-access-token:ghp_abc@github.com/o/r.git"),
            "https://x-access-token:***@github.com/o/r.git"
        );
        assert_eq!(redact_url("https://ghp_abc@github.com/o/r.git"), "https://***@github.com/o/r.git");
        assert_eq!(redact_url("redis://r:6379"), "redis://r:6379");
        // An @ in the path is not userinfo.
        assert_eq!(redact_url("https://h/a@b"), "https://h/a@b");
        assert_eq!(redact_url("not a url"), "not a url");
        assert_eq!(redact_url("git@github.com:o/r.git"), "git@github.com:o/r.git");
    }
}
