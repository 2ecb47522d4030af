//! The docs cannot go stale unnoticed: every relative link and `#anchor` in
//! the README, the changelog and `docs/` resolves (the file exists; the
//! anchor is the GitHub slug of a heading in it), and every `northwind-ops …`
//! command line in their code blocks parses with the program's own clap
//! definitions. The checker is line-based (no Markdown crate) and is itself
//! tested: it must fail on a broken link, a broken anchor and a bad command.

use clap::Parser;
use clap::error::ErrorKind;
use northwind_ops::server::cli::config::Cli;
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// A Markdown page: where it is (links resolve from its directory) and its text.
struct Page {
    path: PathBuf,
    text: String,
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The README, the changelog and every page under `docs/`.
fn pages() -> Vec<Page> {
    let mut paths = vec![root().join("README.md"), root().join("CHANGELOG.md")];
    let mut dirs = vec![root().join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("docs/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|ext| ext == "md") {
                paths.push(path);
            }
        }
    }
    paths.sort();
    paths
        .into_iter()
        .map(|path| Page { text: std::fs::read_to_string(&path).expect("a readable page"), path })
        .collect()
}

/// A fenced code block: its info string, and its lines with their numbers.
struct Block {
    info: String,
    lines: Vec<(usize, String)>,
}

/// Splits a page into its prose (code blocks blanked, so line numbers stay)
/// and its fenced code blocks.
fn split(text: &str) -> (String, Vec<Block>) {
    let mut prose = String::new();
    let mut blocks = Vec::new();
    let mut open: Option<(String, Block)> = None;
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let fence: String = trimmed.chars().take_while(|c| *c == '`' || *c == '~').collect();
        match &mut open {
            Some((opened, block)) => {
                if fence.len() >= opened.len()
                    && fence.starts_with(&opened[..1])
                    && trimmed[fence.len()..].trim().is_empty()
                {
                    blocks.push(open.take().expect("a block is open").1);
                } else {
                    block.lines.push((index + 1, line.to_string()));
                }
                prose.push('\n');
            }
            None if fence.len() >= 3 => {
                let info = trimmed[fence.len()..].trim().to_string();
                open = Some((fence, Block { info, lines: Vec::new() }));
                prose.push('\n');
            }
            None => {
                prose.push_str(line);
                prose.push('\n');
            }
        }
    }
    (prose, blocks)
}

/// Blanks inline code spans (`` `…` ``), keeping line breaks, so a link shown
/// as code is not taken for a link.
fn without_code_spans(prose: &str) -> String {
    let chars: Vec<char> = prose.chars().collect();
    let mut out = String::with_capacity(prose.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] != '`' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let run = chars[i..].iter().take_while(|c| **c == '`').count();
        let mut j = i + run;
        let mut close = None;
        while j < chars.len() {
            let next = chars[j..].iter().take_while(|c| **c == '`').count();
            if next == run {
                close = Some(j);
                break;
            }
            j += next.max(1);
        }
        match close {
            Some(end) => {
                out.extend(chars[i..end + run].iter().map(|c| if *c == '\n' { '\n' } else { ' ' }));
                i = end + run;
            }
            None => {
                out.extend(&chars[i..i + run]);
                i += run;
            }
        }
    }
    out
}

/// The anchors of a page's headings, as GitHub makes them: the heading's text
/// lowercased, punctuation dropped, spaces to hyphens, `-1`, `-2` on repeats.
fn anchors(text: &str) -> Vec<String> {
    let (prose, _) = split(text);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = Vec::new();
    for line in prose.lines() {
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if !(1..=6).contains(&hashes) || !line[hashes..].starts_with(' ') {
            continue;
        }
        let slug = slug(line[hashes..].trim().trim_end_matches('#').trim());
        let repeats = seen.entry(slug.clone()).or_insert(0);
        anchors.push(if *repeats == 0 { slug.clone() } else { format!("{slug}-{repeats}") });
        *repeats += 1;
    }
    anchors
}

fn slug(heading: &str) -> String {
    // A link in a heading shows its text only.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(start) = rest.find("](") {
        let Some(end) = rest[start..].find(')') else { break };
        text.push_str(&rest[..start]);
        rest = &rest[start + end + 1..];
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every relative link of a page that does not resolve, as `file:line: why`.
/// Other pages are read from disk; the page itself from its text (so a page
/// made up in a test checks its own anchors).
fn link_problems(page: &Page) -> Vec<String> {
    let (prose, _) = split(&page.text);
    let prose = without_code_spans(&prose);
    let dir = page.path.parent().expect("a page is in a directory");
    let name = page.path.strip_prefix(root()).unwrap_or(&page.path).display().to_string();
    let mut problems = Vec::new();
    for (at, _) in prose.match_indices("](") {
        let target: String = prose[at + 2..].chars().take_while(|c| *c != ')' && !c.is_whitespace()).collect();
        let line = prose[..at].matches('\n').count() + 1;
        if target.is_empty() || ["http://", "https://", "mailto:"].iter().any(|scheme| target.starts_with(scheme)) {
            continue;
        }
        let (file, anchor) = target.split_once('#').unwrap_or((&target, ""));
        let path = if file.is_empty() { page.path.clone() } else { dir.join(file) };
        let text = if path == page.path {
            Some(page.text.clone())
        } else if path.exists() {
            std::fs::read_to_string(&path).ok()
        } else {
            problems.push(format!("{name}:{line}: {target}: no such file"));
            continue;
        };
        if anchor.is_empty() || path.extension().is_none_or(|ext| ext != "md") {
            continue;
        }
        let headings = anchors(&text.unwrap_or_default());
        if !headings.iter().any(|heading| heading == anchor) {
            problems.push(format!("{name}:{line}: {target}: no heading with the anchor #{anchor}"));
        }
    }
    problems
}

/// Shell words and the operators between commands; variables and command
/// substitutions inside a word stand for a value (`1`, which every kind of
/// flag value the docs show takes: a number, a name, a path, a URL's host).
enum Token {
    Word(String),
    Operator,
}

fn tokens(line: &str) -> Vec<Token> {
    let chars: Vec<char> = line.chars().collect();
    let mut tokens = Vec::new();
    let mut word: Option<String> = None;
    let mut i = 0;
    let end_word = |word: &mut Option<String>, tokens: &mut Vec<Token>| {
        if let Some(word) = word.take() {
            tokens.push(Token::Word(word));
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            c if c.is_whitespace() => end_word(&mut word, &mut tokens),
            '#' if word.is_none() => break,
            '\'' => {
                let close = chars[i + 1..].iter().position(|c| *c == '\'').map_or(chars.len(), |p| i + 1 + p);
                word.get_or_insert_default().extend(&chars[i + 1..close.min(chars.len())]);
                i = close;
            }
            '"' => {
                let close = chars[i + 1..].iter().position(|c| *c == '"').map_or(chars.len(), |p| i + 1 + p);
                let quoted: String = chars[i + 1..close.min(chars.len())].iter().collect();
                word.get_or_insert_default().push_str(&substituted(&quoted));
                i = close;
            }
            '$' if chars.get(i + 1) == Some(&'(') => {
                end_word(&mut word, &mut tokens);
                tokens.push(Token::Operator);
                i += 1;
            }
            '$' => {
                let rest: String = chars[i..].iter().collect();
                let taken = variable_len(&rest);
                word.get_or_insert_default().push_str(if taken > 1 { "1" } else { "$" });
                i += taken.max(1);
                continue;
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' => {
                end_word(&mut word, &mut tokens);
                tokens.push(Token::Operator);
            }
            '\\' if i + 1 < chars.len() => {
                word.get_or_insert_default().push(chars[i + 1]);
                i += 1;
            }
            c => word.get_or_insert_default().push(c),
        }
        i += 1;
    }
    end_word(&mut word, &mut tokens);
    tokens
}

/// How long the variable at the start of `text` is: `$NAME` or `${…}`.
fn variable_len(text: &str) -> usize {
    if text.starts_with("${") {
        return text.find('}').map_or(text.len(), |end| end + 1);
    }
    1 + text[1..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').count()
}

/// A double-quoted string with its variables stood in for.
fn substituted(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let taken = variable_len(&rest[at..]);
        out.push_str(if taken > 1 { "1" } else { "$" });
        rest = &rest[at + taken.max(1)..];
    }
    out.push_str(rest);
    out
}

/// The `northwind-ops` invocations of a shell line: the words after the
/// program's name, wherever a command starts (the line's start, after an
/// operator, after `VAR=value` assignments).
fn invocations(line: &str) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut at_command = true;
    let mut current: Option<Vec<String>> = None;
    for token in tokens(line) {
        match token {
            Token::Operator => {
                found.extend(current.take());
                at_command = true;
            }
            Token::Word(word) => {
                if let Some(args) = &mut current {
                    args.push(word);
                } else if at_command {
                    let assignment = word.split_once('=').is_some_and(|(name, _)| {
                        !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                    });
                    if assignment {
                        continue;
                    }
                    at_command = false;
                    if word.rsplit('/').next() == Some("northwind-ops") {
                        current = Some(Vec::new());
                    }
                }
            }
        }
    }
    found.extend(current);
    found
}

/// Every `northwind-ops` command line in a page's shell code blocks that the
/// program would refuse, as `file:line: command: why`.
fn command_problems(page: &Page) -> Vec<String> {
    let name = page.path.strip_prefix(root()).unwrap_or(&page.path).display().to_string();
    let (_, blocks) = split(&page.text);
    let mut problems = Vec::new();
    for block in blocks.iter().filter(|b| ["", "sh", "bash", "shell", "console"].contains(&b.info.as_str())) {
        let mut joined = String::new();
        let mut first = 0;
        for (number, line) in &block.lines {
            if joined.is_empty() {
                first = *number;
            }
            let line = line.trim_start().strip_prefix("$ ").unwrap_or(line.trim_start());
            match line.strip_suffix('\\') {
                Some(continued) => {
                    joined.push_str(continued);
                    joined.push(' ');
                    continue;
                }
                None => joined.push_str(line),
            }
            for args in invocations(&joined) {
                let argv = std::iter::once("northwind-ops".to_string()).chain(args.iter().cloned());
                if let Err(error) = Cli::try_parse_from(argv)
                    && !matches!(error.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
                {
                    let why = error.to_string();
                    let why = why.lines().next().unwrap_or_default().trim_start_matches("error: ");
                    problems.push(format!("{name}:{first}: northwind-ops {}: {why}", args.join(" ")));
                }
            }
            joined.clear();
        }
    }
    problems
}

#[test]
fn every_relative_link_and_anchor_in_the_readme_and_docs_resolves() {
    let problems: Vec<String> = pages().iter().flat_map(link_problems).collect();
    assert!(problems.is_empty(), "links that do not resolve:\n{}", problems.join("\n"));
}

#[test]
fn every_command_line_in_the_docs_parses_with_the_programs_own_definitions() {
    let pages = pages();
    let problems: Vec<String> = pages.iter().flat_map(command_problems).collect();
    assert!(problems.is_empty(), "command lines the program refuses:\n{}", problems.join("\n"));
    let checked: usize = pages
        .iter()
        .map(|page| {
            split(&page.text).1.iter().flat_map(|b| &b.lines).filter(|(_, l)| l.contains("northwind-ops ")).count()
        })
        .sum();
    assert!(checked >= 20, "only {checked} command lines found: is the checker still reading the code blocks?");
}

#[test]
fn the_checker_fails_on_a_broken_link_a_broken_anchor_and_a_bad_command_line() {
    let page = Page {
        path: root().join("docs").join("a-page-made-up-by-the-test.md"),
        text: [
            "# A heading",
            "",
            "## How do I do it?",
            "",
            "Good: [a guide](operations.md), [its heading](operations.md#how-do-i-watch-todays-pending-orders),",
            "[this page's](#how-do-i-do-it), [the README](../README.md#run-it), [a site](https://example.com),",
            "and `[shown as code](nowhere.md)`.",
            "Broken: [a file](no-such-page.md), [a heading](operations.md#no-such-heading),",
            "[here](#no-such-heading-here).",
            "",
            "```sh",
            "northwind-ops serve --addr 127.0.0.1:3000          # good",
            "export X=1 && northwind-ops --store aws user add alice --role admin",
            "target/release/northwind-ops healthcheck --url https://$DOMAIN/readyz",
            "northwind-ops --help",
            "aws ecr create-repository --repository-name northwind-ops",
            "northwind-ops serve --no-such-flag",
            "printf 'pw\\n' | northwind-ops user add alice --role emperor",
            "northwind-ops plan \\",
            "  --peak-orders-per-second fast",
            "northwind-ops no-such-command",
            "```",
        ]
        .join("\n"),
    };
    let links = link_problems(&page);
    assert_eq!(links.len(), 3, "{links:#?}");
    assert!(links[0].contains("no-such-page.md: no such file"), "{links:#?}");
    assert!(links[1].contains("operations.md#no-such-heading: no heading"), "{links:#?}");
    assert!(links[2].contains("#no-such-heading-here: no heading"), "{links:#?}");
    assert!(links.iter().all(|p| p.starts_with("docs/a-page-made-up-by-the-test.md:")), "{links:#?}");

    let commands = command_problems(&page);
    assert_eq!(commands.len(), 4, "{commands:#?}");
    for (problem, bad) in commands.iter().zip(["--no-such-flag", "emperor", "fast", "no-such-command"]) {
        assert!(problem.contains(bad), "{problem} should name {bad}");
    }
    assert!(commands[2].starts_with("docs/a-page-made-up-by-the-test.md:19:"), "{commands:#?}");
}

#[test]
fn the_readme_is_a_front_door_of_at_most_250_lines_without_a_date() {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("the README");
    assert!(readme.lines().count() <= 250, "README.md has {} lines", readme.lines().count());
    let dated: Vec<&str> = readme
        .lines()
        .filter(|line| {
            line.as_bytes().windows(10).any(|w| {
                w.iter().enumerate().all(|(i, b)| if i == 4 || i == 7 { *b == b'-' } else { b.is_ascii_digit() })
            })
        })
        .collect();
    assert!(dated.is_empty(), "dated lines in the README (measurements go to BENCHMARKS.md):\n{}", dated.join("\n"));
}

/// Where two texts first differ, as `line N: committed … / generated …`.
fn first_difference(committed: &str, generated: &str) -> String {
    let (mut committed_lines, mut generated_lines) = (committed.lines(), generated.lines());
    for number in 1.. {
        match (committed_lines.next(), generated_lines.next()) {
            (None, None) => break,
            (a, b) if a == b => continue,
            (a, b) => {
                return format!(
                    "line {number}:\n  committed: {}\n  generated: {}",
                    a.unwrap_or("(the end)"),
                    b.unwrap_or("(the end)")
                );
            }
        }
    }
    "the line ends differ".into()
}

#[test]
fn the_generated_reference_pages_are_what_the_program_generates() {
    let generated = northwind_ops::server::cli::reference::generated();
    assert!(generated.iter().any(|(name, _)| *name == "configuration.md"), "the configuration reference");
    for (name, text) in generated {
        let committed = std::fs::read_to_string(root().join("docs").join(&name)).unwrap_or_default();
        assert!(
            committed == text,
            "docs/{name} differs from what the program generates from its own definitions: run `make docs` \
             (northwind-ops docs --write docs) and commit the result.\nFirst difference, {}",
            first_difference(&committed, &text)
        );
    }
}
