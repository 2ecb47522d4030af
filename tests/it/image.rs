//! The container image: built with podman FROM scratch by
//! `scripts/build-image.sh` (from the debug binary `make test` built; `make
//! image` builds it from the release one), then run against DynamoDB Local
//! on the host network: it provisions, takes an account, serves; a user signs
//! in and reads the dashboard and the wasm bundle. Every container is stopped
//! and removed by its name, the image removed at the end.

use crate::common;
use crate::common::procs::free_port;
use std::io::Write;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

fn podman() -> Command {
    let mut command = Command::new("podman");
    command.env("CONTAINERS_CONF", format!("{ROOT}/deploy/containers.conf"));
    command
}

fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).to_string()
}

/// Removes what the test made, whatever happened to it.
struct Cleanup {
    tag: String,
    containers: Vec<String>,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for name in &self.containers {
            let _ = podman().args(["rm", "--force", "--time", "5", name]).output();
        }
        let _ = podman().args(["rmi", "--force", &self.tag]).output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_serves_the_app_against_dynamodb_local() {
    let local = common::dynamodb_local();
    let suffix = uuid::Uuid::new_v4().simple().to_string();
    let tag = format!("localhost/northwind-ops:test-{}", &suffix[..12]);
    let name = format!("northwind-test-{}", &suffix[..12]);
    let mut cleanup = Cleanup { tag: tag.clone(), containers: vec![] };

    let started = Instant::now();
    let built = ok(
        Command::new(format!("{ROOT}/scripts/build-image.sh")).args(["debug", &tag]).output().unwrap(),
        "scripts/build-image.sh",
    );
    println!("{} (in {:.1} s)", built.trim(), started.elapsed().as_secs_f64());
    let user =
        ok(podman().args(["image", "inspect", "--format", "{{.Config.User}}", &tag]).output().unwrap(), "inspect");
    assert_eq!(user.trim(), "65532:65532", "the image runs as a non-root user");

    let env = [
        format!("NORTHWIND_ENDPOINT_URL={local}"),
        format!("NORTHWIND_ORDERS_TABLE=image-orders-{suffix}"),
        format!("NORTHWIND_METRICS_TABLE=image-metrics-{suffix}"),
        "NORTHWIND_CURSOR_SECRET=image-test-cursor-secret-of-32-chars".to_string(),
    ];
    let run = |args: &[&str]| {
        let mut command = podman();
        command.args(["run", "--rm", "-i", "--network", "host"]);
        for e in &env {
            command.args(["--env", e]);
        }
        command.arg(&tag).args(args);
        command
    };
    ok(run(&["provision"]).output().unwrap(), "provision in the image");
    let mut add = run(&["user", "add", "image-ops", "--role", "ops"]).stdin(Stdio::piped()).spawn().unwrap();
    add.stdin.take().unwrap().write_all(b"image-password-1\n").unwrap();
    ok(add.wait_with_output().unwrap(), "user add in the image");
    ok(run(&["seed", "--orders", "50", "--customers", "10", "--days", "1"]).output().unwrap(), "seed in the image");

    let port = free_port();
    let mut serve = podman();
    serve.args(["run", "--detach", "--name", &name, "--network", "host"]);
    for e in &env {
        serve.args(["--env", e]);
    }
    serve.arg(&tag).args(["serve", "--addr", &format!("127.0.0.1:{port}")]);
    ok(serve.output().unwrap(), "podman run serve");
    cleanup.containers.push(name.clone());
    let base = format!("http://127.0.0.1:{port}");

    let client = reqwest::Client::builder().cookie_store(true).build().unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(response) = client.get(format!("{base}/healthz")).send().await
            && response.status().is_success()
        {
            break;
        }
        assert!(Instant::now() < deadline, "the container did not answer /healthz within 60 s: {}", logs(&name));
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let signed_in = client
        .post(format!("{base}/auth/login"))
        .header("origin", &base)
        .form(&[("name", "image-ops"), ("password", "image-password-1"), ("next", "/")])
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status().as_u16(), 200, "{}", logs(&name));
    let page = signed_in.text().await.unwrap();
    assert!(page.contains("data-testid=\"pending-table\""), "the dashboard after sign-in: {page}");
    // The site's files come from the image: the stylesheet and the bundle
    // the page names.
    let wasm = page
        .split('"')
        .find(|part| part.starts_with("/pkg/") && part.ends_with(".wasm"))
        .unwrap_or_else(|| panic!("no wasm bundle named in the page: {page}"));
    let bundle = client.get(format!("{base}{wasm}")).send().await.unwrap();
    assert_eq!(bundle.status().as_u16(), 200, "{wasm}");
    assert_eq!(&bundle.bytes().await.unwrap()[..4], b"\0asm");

    // Stopped by name, with SIGTERM: it ends cleanly, within its grace.
    let stopping = Instant::now();
    ok(podman().args(["stop", "--time", "20", &name]).output().unwrap(), "podman stop");
    let status = ok(podman().args(["inspect", "--format", "{{.State.ExitCode}}", &name]).output().unwrap(), "inspect");
    assert_eq!(status.trim(), "0", "exit code after SIGTERM: {}", logs(&name));
    println!("stopped in {:.1} s", stopping.elapsed().as_secs_f64());
}

fn logs(name: &str) -> String {
    podman()
        .args(["logs", "--tail", "40", name])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stderr).to_string())
        .unwrap_or_default()
}
