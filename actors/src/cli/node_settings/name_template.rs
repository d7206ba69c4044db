//! `--name` as a template, so that every node of a StatefulSet or a fleet of hosts can be
//! started with the same command line and still get a name of its own: `{ip}` (the `--listen`
//! IP, `:` written `-` so that an IPv6 address makes a valid name), `{port}` (its port),
//! `{hostname}` (this machine's host name); `{{` and `}}` are literal braces. A name without
//! braces is itself.

use std::net::SocketAddr;

/// The keys a `--name` template may use, as the error names them.
pub const KEYS: &str = "{ip}, {port}, {hostname}";

/// This machine's host name, as the kernel reports it.
pub fn hostname() -> Result<String, String> {
    nix::unistd::gethostname()
        .map_err(|e| format!("cannot read the host name: {e}"))?
        .into_string()
        .map_err(|raw| format!("the host name {raw:?} is not UTF-8"))
}

/// `template` with its keys replaced; `hostname` is asked only when the template uses it.
/// Characters a name cannot hold in a host name (anything but `[A-Za-z0-9_.-]`) become `-`.
pub fn expand(
    template: &str,
    listen: SocketAddr,
    hostname: impl FnOnce() -> Result<String, String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(template.len());
    let mut hostname = Some(hostname);
    let mut rest = template;
    while let Some(i) = rest.find(['{', '}']) {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        if let Some(after) = tail.strip_prefix("{{") {
            out.push('{');
            rest = after;
            continue;
        }
        if let Some(after) = tail.strip_prefix("}}") {
            out.push('}');
            rest = after;
            continue;
        }
        let Some(end) = tail.strip_prefix('{').and_then(|t| t.find('}')) else {
            return Err(format!(
                "{template:?}: an unmatched brace (the keys are {KEYS}; write {{{{ or }}}} for a brace)"
            ));
        };
        let key = &tail[1..=end];
        match key {
            "ip" => out.push_str(&listen.ip().to_string().replace(':', "-")),
            "port" => out.push_str(&listen.port().to_string()),
            "hostname" => {
                let read = hostname.take().map_or_else(
                    || Err("the host name is read once".to_owned()),
                    |read| read(),
                )?;
                out.extend(read.chars().map(|c| {
                    if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                        c
                    } else {
                        '-'
                    }
                }));
            }
            other => {
                return Err(format!(
                    "{template:?}: unknown key {{{other}}} (the keys are {KEYS})"
                ))
            }
        }
        rest = &tail[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listen() -> SocketAddr {
        "10.233.0.7:7100".parse().unwrap()
    }

    fn host() -> Result<String, String> {
        Ok("web-1".into())
    }

    #[test]
    fn keys_are_replaced_and_plain_names_are_themselves() {
        assert_eq!(expand("n1", listen(), host).unwrap(), "n1");
        assert_eq!(expand("{ip}", listen(), host).unwrap(), "10.233.0.7");
        assert_eq!(
            expand("node-{ip}-{port}", listen(), host).unwrap(),
            "node-10.233.0.7-7100"
        );
        assert_eq!(expand("{hostname}", listen(), host).unwrap(), "web-1");
        let v6: SocketAddr = "[fd00::7]:7100".parse().unwrap();
        assert_eq!(expand("{ip}", v6, host).unwrap(), "fd00--7");
        assert_eq!(expand("a{{b}}", listen(), host).unwrap(), "a{b}");
    }

    #[test]
    fn the_host_name_is_read_only_when_used_and_made_a_valid_name() {
        let never = || -> Result<String, String> { panic!("the host name was read") };
        assert_eq!(expand("n-{ip}", listen(), never).unwrap(), "n-10.233.0.7");
        let odd = || Ok("my host:1".to_owned());
        assert_eq!(expand("{hostname}", listen(), odd).unwrap(), "my-host-1");
        let failing = || Err("no host name".to_owned());
        assert!(expand("{hostname}", listen(), failing).is_err());
    }

    #[test]
    fn unknown_keys_and_unmatched_braces_are_refused_naming_the_keys() {
        for bad in ["{name}", "{ip", "ip}", "{}", "n-{IP}"] {
            let err = expand(bad, listen(), host).expect_err(bad);
            assert!(err.contains(KEYS), "{bad}: {err}");
        }
    }
}
