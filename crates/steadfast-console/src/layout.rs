//! The page shell every console page shares (header, navigation, live sections), the refusal
//! and login pages, and the helpers pages use to show text: everything shown goes through
//! [`shown`] (the sanitizer) and maud's HTML escaping.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, PreEscaped, html};

/// The console's stylesheet and script, served from the binary (no CDN, no build step).
pub const CSS: &str = include_str!("../assets/console.css");
/// The live-update script (a few lines of plain JavaScript over server-sent events).
pub const JS: &str = include_str!("../assets/console.js");

/// A part of a page that live updates replace, by its element id.
#[derive(Debug)]
pub struct Section {
    /// The element id (stable across renders).
    pub id: &'static str,
    /// Its content.
    pub html: Markup,
}

/// A rendered page: a title and its sections.
#[derive(Debug)]
pub struct Page {
    /// The title (also the heading).
    pub title: String,
    /// Whether its sections refresh live.
    pub live: bool,
    /// Its sections, in order.
    pub sections: Vec<Section>,
}

/// Text as the page may show it: sanitized (secrets, internal URLs and addresses redacted).
pub fn shown(text: &str) -> Cow<'_, str> {
    steadfast::sanitize(text)
}

/// A time, as UTC: the time of day if it is today (by `now`), else the date too. Times are
/// shown absolute, not "3s ago", so that a section changes only when its data does (live
/// updates send only sections that changed).
pub fn when(at: DateTime<Utc>, now: DateTime<Utc>) -> Markup {
    let text = if at.date_naive() == now.date_naive() {
        at.format("%H:%M:%S").to_string()
    } else {
        at.format("%Y-%m-%d %H:%M").to_string()
    };
    html! { time datetime=(at.to_rfc3339()) title=(at.format("%Y-%m-%d %H:%M:%S UTC")) { (text) } }
}

/// A short digest of a section's HTML: the page and live updates compare it to skip sections
/// that did not change.
pub fn digest(html: &str) -> String {
    use std::hash::{Hash, Hasher};
    // SipHash with fixed keys: the same in the page and in the live stream of one process.
    let mut h = std::collections::hash_map::DefaultHasher::new();
    html.hash(&mut h);
    format!("{:016x}", h.finish())
}

/// A duration in milliseconds, short.
pub fn ms(ms: i64) -> String {
    match ms {
        i64::MAX => "> 60s".to_owned(),
        m if m < 1000 => format!("{m}ms"),
        m => format!("{:.1}s", m as f64 / 1000.0),
    }
}

/// The whole page around `page`'s sections.
///
/// With `logout` (a session's CSRF token), the header carries a log-out button.
pub fn shell(base: &str, nav: &[(&str, String)], page: &Page, logout: Option<&str>) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (page.title) " · Steadfast console" }
                link rel="stylesheet" href={ (base) "/assets/console.css" };
            }
            body data-base=(base) data-live=[page.live.then_some("1")] {
                header {
                    strong { "Steadfast" }
                    nav aria-label="main" {
                        @for (label, href) in nav { a href=(href) { (label) } }
                    }
                    @if let Some(csrf) = logout {
                        form.inline method="post" action={ (base) "/logout" } {
                            input type="hidden" name="csrf" value=(csrf);
                            button type="submit" { "Log out" }
                        }
                    }
                }
                main {
                    h1 { (page.title) }
                    @for s in &page.sections {
                        section id=(s.id) data-h=(digest(&s.html.0)) { (s.html) }
                    }
                }
                script src={ (base) "/assets/console.js" } {}
            }
        }
    }
}

/// A small page with one message (refusals, errors).
pub fn message(base: &str, title: &str, text: &str) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { (title) " · Steadfast console" }
                link rel="stylesheet" href={ (base) "/assets/console.css" };
            }
            body { main { h1 { (title) } p { (shown(text)) } p { a href={ (base) "/" } { "Back to the console" } } } }
        }
    }
}

/// The login page.
pub fn login(base: &str, csrf: &str, failed: bool) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                title { "Log in · Steadfast console" }
                link rel="stylesheet" href={ (base) "/assets/console.css" };
            }
            body {
                main {
                    h1 { "Log in to the Steadfast console" }
                    @if failed { p.notice.bad role="alert" { "That is not the admin token." } }
                    form method="post" action={ (base) "/login" } {
                        input type="hidden" name="csrf" value=(csrf);
                        p {
                            label for="token" { "Admin token " }
                            input id="token" type="password" name="token" autocomplete="current-password" required autofocus;
                        }
                        p { button type="submit" { "Log in" } }
                    }
                }
            }
        }
    }
}

/// A POST form of one button, carrying the CSRF token, a return path and hidden fields.
pub fn button(
    action: &str,
    csrf: &str,
    back: &str,
    fields: &[(&str, String)],
    label: &str,
    danger: bool,
) -> Markup {
    html! {
        form.inline method="post" action=(action) {
            input type="hidden" name="csrf" value=(csrf);
            input type="hidden" name="back" value=(back);
            @for (k, v) in fields { input type="hidden" name=(k) value=(v); }
            button type="submit" class=[danger.then_some("danger")] { (label) }
        }
    }
}

/// Trusted markup (the SVG of a chart built from numbers only).
pub fn trusted(s: String) -> Markup {
    PreEscaped(s)
}
