//! Made-up credentials, built at test time so that no format-valid secret sits in the source.
//!
//! Each is obviously synthetic (cycled `FAKE`/`Example` patterns) but has its provider's
//! documented shape, so the rules must recognise it.

#![allow(dead_code)]

/// `n` characters cycled from `alphabet`, starting at `offset`.
fn cycle(alphabet: &str, n: usize, offset: usize) -> String {
    alphabet.chars().cycle().skip(offset).take(n).collect()
}

/// Mixed-case letters and digits.
pub fn mixed(n: usize) -> String {
    cycle("FakeEXAMPLE0123456789testTEST", n, 0)
}

/// Letters only, mixed case.
pub fn letters(n: usize) -> String {
    cycle("FakeOnlyLettersEXAMPLE", n, 0)
}

pub fn hex(n: usize) -> String {
    cycle("0123456789abcdef", n, 3)
}

pub fn upper(n: usize) -> String {
    cycle("FAKE0EXAMPLE1TEST2", n, 0)
}

pub fn digits(n: usize) -> String {
    cycle("1234567890", n, 0)
}

/// (placeholder, format) → value. The format names the row of `docs/sanitizer.md`.
pub fn fakes() -> Vec<(&'static str, &'static str, String)> {
    vec![
        ("aws_id", "AWS access key id", format!("AKIA{}", upper(16))),
        (
            "aws_sts",
            "AWS temporary access key id",
            format!("ASIA{}", upper(16)),
        ),
        ("gcp_key", "Google API key", format!("AIza{}", mixed(35))),
        (
            "gcp_secret",
            "Google OAuth client secret",
            format!("GOCSPX-{}", mixed(28)),
        ),
        (
            "ya29",
            "Google OAuth access token",
            format!("ya29.{}", mixed(60)),
        ),
        (
            "ghp",
            "GitHub personal access token",
            format!("ghp_{}", mixed(36)),
        ),
        ("gho", "GitHub OAuth token", format!("gho_{}", mixed(36))),
        (
            "ghs",
            "GitHub app installation token",
            format!("ghs_{}", mixed(36)),
        ),
        (
            "ghu",
            "GitHub user-to-server token",
            format!("ghu_{}", mixed(36)),
        ),
        ("ghr", "GitHub refresh token", format!("ghr_{}", mixed(36))),
        (
            "ghpat",
            "GitHub fine-grained PAT",
            format!("github_pat_{}_{}", mixed(22), mixed(59)),
        ),
        (
            "glpat",
            "GitLab personal access token",
            format!("glpat-{}", mixed(20)),
        ),
        ("gldt", "GitLab deploy token", format!("gldt-{}", mixed(20))),
        (
            "glrunner",
            "GitLab runner registration token",
            format!("GR1348941{}", mixed(20)),
        ),
        (
            "xoxb",
            "Slack bot token",
            format!("xoxb-{}-{}-{}", digits(12), digits(13), mixed(24)),
        ),
        (
            "xoxp",
            "Slack user token",
            format!(
                "xoxp-{}-{}-{}-{}",
                digits(12),
                digits(12),
                digits(13),
                hex(32)
            ),
        ),
        (
            "xapp",
            "Slack app-level token",
            format!("xapp-1-A{}-{}-{}", upper(10), digits(13), hex(64)),
        ),
        (
            "slack_hook",
            "Slack webhook URL",
            format!(
                "https://hooks.slack.com/services/T{}/B{}/{}",
                upper(8),
                upper(8),
                mixed(24)
            ),
        ),
        (
            "discord_hook",
            "Discord webhook URL",
            format!(
                "https://discord.com/api/webhooks/{}/{}",
                digits(18),
                mixed(68)
            ),
        ),
        (
            "teams_hook",
            "Microsoft Teams webhook URL",
            format!(
                "https://contoso.webhook.office.com/webhookb2/{}@{}/IncomingWebhook/{}/{}",
                hex(8),
                hex(8),
                hex(32),
                hex(8)
            ),
        ),
        (
            "sk_live",
            "Stripe secret key",
            format!("sk_live_{}", mixed(24)),
        ),
        (
            "rk_live",
            "Stripe restricted key",
            format!("rk_live_{}", mixed(24)),
        ),
        (
            "sk_test",
            "Stripe test secret key",
            format!("sk_test_{}", mixed(24)),
        ),
        (
            "whsec",
            "Stripe webhook signing secret",
            format!("whsec_{}", mixed(32)),
        ),
        ("openai", "OpenAI API key", format!("sk-{}", mixed(48))),
        (
            "openai_letters",
            "OpenAI API key (letters only)",
            format!("sk-{}", letters(40)),
        ),
        (
            "openai_proj",
            "OpenAI project key",
            format!("sk-proj-{}_{}", mixed(40), mixed(20)),
        ),
        (
            "openai_svc",
            "OpenAI service-account key",
            format!("sk-svcacct-{}", mixed(48)),
        ),
        (
            "anthropic",
            "Anthropic API key",
            format!("sk-ant-api03-{}-{}AA", mixed(60), mixed(30)),
        ),
        ("hf", "Hugging Face token", format!("hf_{}", letters(34))),
        (
            "sendgrid",
            "SendGrid API key",
            format!("SG.{}.{}", mixed(22), mixed(43)),
        ),
        ("twilio_sid", "Twilio account SID", format!("AC{}", hex(32))),
        ("twilio_key", "Twilio API key SID", format!("SK{}", hex(32))),
        ("mailgun", "Mailgun API key", format!("key-{}", hex(32))),
        (
            "mailchimp",
            "Mailchimp API key",
            format!("{}-us21", hex(32)),
        ),
        ("npm", "npm access token", format!("npm_{}", mixed(36))),
        (
            "pypi",
            "PyPI API token",
            format!("pypi-AgEIcHlwaS5vcmc{}", mixed(60)),
        ),
        ("dckr", "Docker Hub PAT", format!("dckr_pat_{}", mixed(27))),
        ("dop", "DigitalOcean token", format!("dop_v1_{}", hex(64))),
        (
            "shpat",
            "Shopify access token",
            format!("shpat_{}", hex(32)),
        ),
        (
            "atatt",
            "Atlassian API token",
            format!("ATATT3x{}={}", mixed(180), upper(8)),
        ),
        ("heroku", "Heroku API key", format!("HRKU-AA{}", mixed(58))),
        (
            "jwt",
            "JSON Web Token",
            format!("eyJhbGciOiJIUzI1NiJ9.eyJ{}.{}", mixed(40), mixed(43)),
        ),
        (
            "age",
            "age secret key",
            format!("AGE-SECRET-KEY-1{}", upper(58)),
        ),
        (
            "vault",
            "HashiCorp Vault token",
            format!("hvs.{}", mixed(90)),
        ),
        ("databricks", "Databricks token", format!("dapi{}", hex(32))),
        (
            "telegram",
            "Telegram bot token",
            format!("{}:AA{}", digits(10), mixed(33)),
        ),
        ("linear", "Linear API key", format!("lin_api_{}", mixed(40))),
        (
            "notion",
            "Notion integration token",
            format!("ntn_{}", mixed(46)),
        ),
        (
            "postman",
            "Postman API key",
            format!("PMAK-{}-{}", hex(24), hex(34)),
        ),
        (
            "grafana",
            "Grafana service account token",
            format!("glsa_{}_{}", mixed(32), hex(8)),
        ),
        (
            "newrelic",
            "New Relic user key",
            format!("NRAK-{}", upper(27)),
        ),
        ("groq", "Groq API key", format!("gsk_{}", mixed(52))),
        ("xai", "xAI API key", format!("xai-{}", mixed(80))),
        ("replicate", "Replicate token", format!("r8_{}", mixed(37))),
        ("pplx", "Perplexity API key", format!("pplx-{}", mixed(48))),
        (
            "square",
            "Square access token",
            format!("sq0atp-{}", mixed(22)),
        ),
        (
            "supabase",
            "Supabase access token",
            format!("sbp_{}", hex(40)),
        ),
        (
            "sentry_token",
            "Sentry auth token",
            format!("sntrys_{}", mixed(60)),
        ),
        (
            "pscale",
            "PlanetScale token",
            format!("pscale_tkn_{}", mixed(43)),
        ),
        ("doppler", "Doppler token", format!("dp.pt.{}", mixed(43))),
        ("pulumi", "Pulumi access token", format!("pul-{}", hex(40))),
        (
            "tfc",
            "Terraform Cloud token",
            format!("{}.atlasv1.{}", mixed(14), mixed(67)),
        ),
        ("figma", "Figma PAT", format!("figd_{}", mixed(40))),
        (
            "pem",
            "PEM private key",
            format!(
                "-----BEGIN PRIVATE KEY-----\nMIIEv{}\n{}==\n-----END PRIVATE KEY-----",
                mixed(60),
                mixed(40)
            ),
        ),
        (
            "rsa_pem",
            "PEM RSA private key",
            format!(
                "-----BEGIN RSA PRIVATE KEY-----\nMIIEo{}\n-----END RSA PRIVATE KEY-----",
                mixed(60)
            ),
        ),
        (
            "openssh",
            "OpenSSH private key",
            format!(
                "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjE{}\n-----END OPENSSH PRIVATE KEY-----",
                mixed(60)
            ),
        ),
        (
            "pgp",
            "PGP private key block",
            format!(
                "-----BEGIN PGP PRIVATE KEY BLOCK-----\n\nlQOYBF{}\n-----END PGP PRIVATE KEY BLOCK-----",
                mixed(60)
            ),
        ),
    ]
}

/// Secrets without a shape of their own (random base64 or hex): recognisable only by where
/// they are (`AccountKey=…`, `TWILIO_AUTH_TOKEN=…`, `https://<key>@host`).
pub fn contextual_fakes() -> Vec<(&'static str, &'static str, String)> {
    vec![
        (
            "azure_key",
            "Azure storage account key",
            format!("{}==", mixed(86)),
        ),
        ("sentry_key", "Sentry DSN key", hex(32)),
        ("hex32", "Twilio auth token", hex(32)),
    ]
}

/// The placeholders of `template` (`{ghp}`) replaced by their fake values.
pub fn fill(template: &str) -> String {
    let mut out = template.to_owned();
    for (name, _, value) in fakes().into_iter().chain(contextual_fakes()) {
        out = out.replace(&format!("{{{name}}}"), &value);
    }
    let left = regex::Regex::new(r"\{[a-z0-9_]+\}").unwrap();
    assert!(!left.is_match(&out), "unknown placeholder in {template:?}");
    out
}
