//! The configuration reference, `docs/configuration.md`, generated from the
//! command line's own definitions: every command, flag and argument with its
//! environment variable, default and help as clap holds them (`Cli::command()`).
//! What clap cannot know (how settings are read, which guide explains a
//! command, the variables read outside clap) is written here once, as the
//! page's fixed parts. `northwind-ops docs --write docs` writes the page;
//! `tests/it/docs.rs` fails when the committed one differs.

use crate::server::cli::config::Cli;
use clap::{Arg, ArgAction, Command, CommandFactory};
use std::fmt::Write;

/// The page's start: what it is and how settings are read.
const HEADER: &str = r#"# Configuration reference

Every setting of `northwind-ops` is a command-line flag; most have an environment variable too.
This page lists them all, command by command. The program's own `--help` says the same:

```sh
northwind-ops --help
northwind-ops serve --help
```

*This page is generated from the program's clap definitions (`src/server/cli/reference.rs`):
do not edit it by hand. After changing a flag or its help, run `make docs` (or
`northwind-ops docs --write docs`); `cargo test --test it docs` fails until the page matches.*

## How are settings read?

- A flag given on the command line wins over its environment variable, which wins over the
  default.
- A bare `northwind-ops`, with no command, is `serve`: it reads `serve`'s flags and environment
  variables as if `serve` had been named (what the container image and `cargo leptos watch` run).
- The [store settings](#settings-every-command-takes) are global: they may come before or after
  the command's name (`northwind-ops --store aws user list` and `northwind-ops user list --store
  aws` are the same).
- Boolean flags (`--no-consumer`, `--provision`) take their variable as `true` or `false`
  (`NORTHWIND_NO_CONSUMER=true`).
- Secrets are never plain flags, where other users could read them in the process list: the
  cursor secret and the OpenID Connect client secret come from an environment variable or a file
  ([below](#which-environment-variables-are-read-besides-the-flags)).

## Settings every command takes

Where the data lives, which tables, and how the store is reached
([Engineering](engineering.md#which-store-should-i-use)).
"#;

/// The page's end: the variables read outside clap.
const FOOTER: &str = r#"## Which environment variables are read besides the flags?

| variable | read by | what it is |
|---|---|---|
| `NORTHWIND_CURSOR_SECRET` | every command that signs cursors | The secret that signs page cursors, at least 32 characters (or `--cursor-secret-file`, not both). Give every instance behind one load balancer the same. Without either, a key is generated once into `<data-dir>/cursor.key`. |
| `NORTHWIND_OIDC_CLIENT_SECRET` | `serve` | The OpenID Connect client secret (or `--oidc-client-secret-file`, not both). |
| `NORTHWIND_LOG` | every command | The log filter, in `tracing`'s `EnvFilter` syntax (default `info,aws_config=warn,aws_smithy_runtime=warn,dynoxide=error`). The log goes to standard error. |
| `AWS_ENDPOINT_URL_DYNAMODB`, `AWS_ENDPOINT_URL` | every command | The DynamoDB endpoint when `--endpoint-url` is not given (the SDK's own variables). |
| `AWS_ENDPOINT_URL_CLOUDWATCH` | `serve`, `advise` | The CloudWatch endpoint when `--cloudwatch-endpoint-url` is not given. |
| `AWS_REGION`, `AWS_PROFILE`, credentials | `--store aws` | The standard AWS configuration chain. |
| `LEPTOS_SITE_ADDR` | `serve`, `healthcheck` | The address when `--addr` (`NORTHWIND_ADDR`) is not given; cargo-leptos sets it. |
| `LEPTOS_SITE_ROOT` | `serve` | Where the built site (wasm, JS, CSS) is read from (default `target/site`). |
| `AWS_LAMBDA_RUNTIME_API` | `lambda` | The Lambda Runtime API's address; Lambda sets it, and `lambda` refuses to start without it. |
"#;

/// What the page says of a command besides its own help: the guide that
/// explains it (a link), and what its flags cannot say. Every visible
/// command has one (a unit test holds it).
const GUIDES: &[(&str, &str, &str)] = &[
    (
        "serve",
        "[Security](security.md) for sign-in",
        "Its limits are explained in [the API's limits](api.md#what-are-the-limits).",
    ),
    ("provision", "[Engineering](engineering.md#how-do-i-create-or-check-the-tables)", ""),
    (
        "seed",
        "[Engineering](engineering.md#how-do-i-load-demo-data)",
        "It creates the tables first when they are missing, so it takes `provision`'s flags too.",
    ),
    ("consume", "[Engineering](engineering.md#how-do-i-run-the-stream-consumer-on-its-own)", ""),
    (
        "lambda",
        "[Architecture](architecture.md#how-does-the-lambda-form-apply-each-record-once)",
        "In Lambda the store settings come from the environment (the template sets \
         `NORTHWIND_STORE=aws`, the table names and `NORTHWIND_DATA_DIR=/tmp`).",
    ),
    ("lambda-local", "[Engineering](engineering.md#how-do-i-run-them-by-hand)", ""),
    ("reconcile", "[Engineering](engineering.md#how-do-i-check-and-repair-the-counters)", ""),
    ("replay", "[Running on AWS](aws.md#what-if-the-consumer-gave-up-on-records)", ""),
    ("consumer", "[Running on AWS](aws.md#how-do-i-switch-between-the-lambda-and-the-in-process-consumer)", ""),
    ("loadgen", "[Engineering](engineering.md#how-do-i-generate-load)", ""),
    ("user", "[Security](security.md#how-do-i-add-local-accounts)", ""),
    ("token", "[Security](security.md#how-do-i-give-a-script-access)", ""),
    ("advise", "[Engineering](engineering.md#which-capacity-mode-should-a-table-use)", ""),
    (
        "throttle-proxy",
        "[Engineering](engineering.md#how-do-i-rehearse-hot-partitions)",
        "It opens no store of its own.",
    ),
    ("stream-proxy", "[Engineering](engineering.md#how-do-i-rehearse-many-stream-shards)", ""),
    (
        "rehearse",
        "[Engineering](engineering.md#how-do-i-compare-shard-counts-side-by-side)",
        "With `--counters`, see [the counters at many \
         shards](engineering.md#how-do-i-measure-the-counters-at-many-shards).",
    ),
    ("plan", "[Engineering](engineering.md#how-many-write-shards-does-a-sale-need)", ""),
    ("shards", "[Writing orders from another service](writers.md#how-many-shards-does-a-day-have)", ""),
    ("ready", "[Engineering](engineering.md#is-a-sale-plan-ready-from-the-command-line)", "An error exits 1."),
    (
        "template",
        "[Running on AWS](aws.md)",
        "The billing flags become the defaults of the template's capacity parameters; the table names \
         come from the store settings.",
    ),
    ("healthcheck", "[Running on AWS](aws.md#what-does-the-stack-hold)", "It needs no store and no secret."),
];

/// The generated pages, each with its path under `docs/`: this
/// configuration reference, the JSON API's OpenAPI document, and the IAM
/// policies (their statements on the metrics table's items).
pub fn generated() -> Vec<(String, String)> {
    let mut pages = vec![
        ("configuration.md".to_string(), configuration_markdown()),
        ("openapi.json".to_string(), crate::server::http::api::openapi::json().to_string()),
    ];
    pages.extend(crate::server::deploy::iam::generated_files());
    pages
}

/// `northwind-ops docs --write DIR`: every generated page written into `DIR`.
pub fn write(dir: &std::path::Path) -> Result<(), super::CliError> {
    for (name, text) in generated() {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|source| super::CliError::Io { what: format!("writing {}", path.display()), source })?;
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// `docs/configuration.md` as the program's definitions make it.
pub fn configuration_markdown() -> String {
    let cli = Cli::command();
    // Blocks of text, a blank line between each two.
    let mut blocks = vec![HEADER.trim_end().to_string(), table(&cli)];
    for command in cli.get_subcommands().filter(|c| !c.is_hide_set()) {
        let name = command.get_name();
        blocks.push(format!("## {name}"));
        let (link, more) = guide(name).unwrap_or(("", ""));
        blocks.push(paragraph(&about(command, link), more));
        let nested: Vec<&Command> = command.get_subcommands().filter(|c| !c.is_hide_set()).collect();
        if nested.is_empty() {
            blocks.push(table(command));
        }
        for sub in nested {
            blocks.push(format!("### {name} {}", sub.get_name()));
            blocks.push(paragraph(&about(sub, ""), ""));
            blocks.push(table(sub));
        }
    }
    blocks.push(FOOTER.trim_end().to_string());
    let blocks: Vec<&str> = blocks.iter().map(|b| b.trim_end()).filter(|b| !b.is_empty()).collect();
    blocks.join("\n\n") + "\n"
}

fn guide(command: &str) -> Option<(&'static str, &'static str)> {
    GUIDES.iter().find(|(name, _, _)| *name == command).map(|(_, link, more)| (*link, *more))
}

/// A command's help as `--help` gives it (the long form when there is
/// one), as a sentence, and where the guide explains it.
fn about(command: &Command, link: &str) -> String {
    let text = command.get_long_about().or(command.get_about()).map(|s| s.to_string()).unwrap_or_default();
    let text = escape(&one_line(&text));
    let text = text.trim_end_matches('.');
    if link.is_empty() { format!("{text}.") } else { format!("{text}. See {link}.") }
}

/// Sentences as one paragraph wrapped at 100 columns.
fn paragraph(first: &str, more: &str) -> String {
    let text = if more.is_empty() { first.to_string() } else { format!("{first} {more}") };
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.len() + 1 + word.len() > 100 {
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out
}

/// The table of a command's own arguments and flags (its subcommands' and
/// the global ones apart), or a sentence when it has none.
fn table(command: &Command) -> String {
    let args: Vec<&Arg> = command.get_arguments().filter(|a| !a.is_hide_set()).collect();
    if args.is_empty() {
        return "It has no flags of its own: it takes the [store settings](#settings-every-command-takes).\n".into();
    }
    let first = if args.iter().any(|a| a.is_positional()) { "argument or flag" } else { "flag" };
    let mut out = format!("| {first} | environment variable | default | what it sets |\n|---|---|---|---|\n");
    for arg in args {
        let env = arg.get_env().map(|e| format!("`{}`", e.to_string_lossy())).unwrap_or_else(|| "—".into());
        let _ = writeln!(out, "| {} | {env} | {} | {} |", usage(arg), default(arg), escape(&help(arg)));
    }
    out
}

/// How an argument is written: `--flag` `<VALUE>`, or `<NAME>` for a positional one.
fn usage(arg: &Arg) -> String {
    let value = || {
        let names: Vec<String> = arg.get_value_names().map_or_else(
            || vec![arg.get_id().as_str().to_ascii_uppercase()],
            |names| names.iter().map(|n| n.to_string()).collect(),
        );
        names.iter().map(|n| format!("`<{n}>`")).collect::<Vec<_>>().join(" ")
    };
    if arg.is_positional() {
        return value();
    }
    let mut names = Vec::new();
    if let Some(short) = arg.get_short() {
        names.push(format!("`-{short}`"));
    }
    if let Some(long) = arg.get_long() {
        names.push(format!("`--{long}`"));
    }
    let takes_value = !matches!(
        arg.get_action(),
        ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count | ArgAction::Help | ArgAction::Version
    );
    let mut out = names.join(", ");
    if takes_value {
        out.push(' ');
        out.push_str(&value());
    }
    out
}

/// The default, or `—` (a switch's `false` is no default worth a column).
fn default(arg: &Arg) -> String {
    let switch = matches!(arg.get_action(), ArgAction::SetTrue | ArgAction::SetFalse | ArgAction::Count);
    let values: Vec<String> = arg.get_default_values().iter().map(|v| v.to_string_lossy().into_owned()).collect();
    if switch || values.is_empty() { "—".into() } else { format!("`{}`", values.join(",")) }
}

/// An argument's help, with its possible values: each with its own help
/// when they have one (`One of: …`), else as clap lists them.
fn help(arg: &Arg) -> String {
    let mut text = one_line(&arg.get_long_help().or(arg.get_help()).map(|s| s.to_string()).unwrap_or_default());
    let values: Vec<_> = arg.get_possible_values().into_iter().filter(|v| !v.is_hide_set()).collect();
    if values.is_empty() || !arg.get_action().takes_values() {
        return text;
    }
    let described = values.iter().any(|v| v.get_help().is_some());
    let listed = if described {
        let each: Vec<String> = values
            .iter()
            .map(|v| match v.get_help() {
                Some(help) => format!("`{}`: {}", v.get_name(), one_line(&help.to_string()).trim_end_matches('.')),
                None => format!("`{}`", v.get_name()),
            })
            .collect();
        format!("One of: {}.", each.join("; "))
    } else {
        let names: Vec<&str> = values.iter().map(|v| v.get_name()).collect();
        format!("[possible values: {}]", names.join(", "))
    };
    if !text.is_empty() && !text.ends_with('.') && !text.ends_with(']') && described {
        text.push('.');
    }
    if text.is_empty() { listed } else { format!("{text} {listed}") }
}

/// Help text as one line: doc comments' line breaks and paragraphs joined.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Help text made safe for Markdown and a table cell: `|` escaped, and
/// `<…>` outside code spans written as entities (a renderer would take
/// `<data-dir>` for a tag).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut code = false;
    for c in text.chars() {
        match c {
            '`' => {
                code = !code;
                out.push(c);
            }
            '|' => out.push_str("\\|"),
            '<' if !code => out.push_str("&lt;"),
            '>' if !code => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn visible(command: &Command) -> impl Iterator<Item = &Command> {
        command.get_subcommands().filter(|c| !c.is_hide_set())
    }

    #[test]
    fn every_command_has_its_guide_and_every_argument_its_help() {
        let cli = Cli::command();
        let mut missing = Vec::new();
        for command in visible(&cli) {
            if guide(command.get_name()).is_none_or(|(link, _)| link.is_empty()) {
                missing.push(format!("{}: no entry in GUIDES", command.get_name()));
            }
            for sub in std::iter::once(command).chain(visible(command)) {
                if sub.get_about().is_none() {
                    missing.push(format!("{}: no help", sub.get_name()));
                }
                for arg in sub.get_arguments().filter(|a| !a.is_hide_set()) {
                    if arg.get_help().is_none() {
                        missing.push(format!("{} {}: no help", sub.get_name(), arg.get_id()));
                    }
                }
            }
        }
        for arg in cli.get_arguments() {
            if arg.get_help().is_none() {
                missing.push(format!("{}: no help", arg.get_id()));
            }
        }
        assert!(missing.is_empty(), "{missing:#?}");
        let named: Vec<&str> = visible(&cli).map(Command::get_name).collect();
        for (name, _, _) in GUIDES {
            assert!(named.contains(name), "GUIDES names {name}, which is no command");
        }
    }

    #[test]
    fn the_page_has_every_command_flag_and_variable() {
        let page = configuration_markdown();
        for heading in ["## serve", "## seed", "## user", "### user add", "### token revoke", "## rehearse"] {
            assert!(page.lines().any(|l| l == heading), "{heading}");
        }
        assert!(page.contains("| `--store` `<STORE>` | `NORTHWIND_STORE` | — |"), "the global flags");
        assert!(page.contains("| `--shards` `<SHARDS>` | `NORTHWIND_SHARDS` | `10` |"));
        assert!(page.contains("| `<NAME>` | — | — | The account's name"), "positional arguments");
        assert!(page.contains("One of: `on-demand`: Pay per request"), "possible values with their help");
        assert!(page.contains("[possible values: console, service, both]"), "possible values without help");
        assert!(page.contains("&lt;data-dir&gt;/cursor.key"), "<…> outside code is escaped");
        assert!(!page.contains("\n## docs"), "the hidden command is left out");
        assert!(page.ends_with("refuses to start without it. |\n"));
        assert!(!page.contains("\n\n\n"), "one blank line between blocks");
    }

    #[test]
    fn table_cells_escape_pipes_and_angle_brackets_outside_code() {
        assert_eq!(escape("a | b <x> `<y>`"), "a \\| b &lt;x&gt; `<y>`");
    }
}
