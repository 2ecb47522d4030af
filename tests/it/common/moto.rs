//! moto's server (`python3 -m moto.server`, from scripts/setup.sh) as the
//! tests' AWS emulator (CloudWatch, CloudFormation and what it creates,
//! Application Auto Scaling), on
//! a free loopback port, stopped by its pid when dropped.

pub struct Moto {
    child: std::process::Child,
    pub url: String,
}

impl Moto {
    pub async fn start() -> Moto {
        // Moto binds the free port right after.
        let port = super::procs::free_port();
        let child = std::process::Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("moto's server starts: run scripts/setup.sh (pip install 'moto[server]')");
        let moto = Moto { child, url: format!("http://127.0.0.1:{port}") };
        for _ in 0..150 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
                return moto;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        panic!("moto's server did not listen on {port}");
    }

    pub fn cloudwatch(&self) -> aws_sdk_cloudwatch::Client {
        let config = aws_sdk_cloudwatch::Config::builder()
            .behavior_version(aws_sdk_cloudwatch::config::BehaviorVersion::latest())
            .region(aws_sdk_cloudwatch::config::Region::new("us-east-1"))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_cloudwatch::config::Credentials::new("t", "t", None, None, "tests"))
            .build();
        aws_sdk_cloudwatch::Client::from_conf(config)
    }

    pub fn cloudformation(&self) -> aws_sdk_cloudformation::Client {
        let config = aws_sdk_cloudformation::Config::builder()
            .behavior_version(aws_sdk_cloudformation::config::BehaviorVersion::latest())
            .region(aws_sdk_cloudformation::config::Region::new("us-east-1"))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_cloudformation::config::Credentials::new("t", "t", None, None, "tests"))
            .build();
        aws_sdk_cloudformation::Client::from_conf(config)
    }

    pub fn autoscaling(&self) -> aws_sdk_applicationautoscaling::Client {
        let config = aws_sdk_applicationautoscaling::Config::builder()
            .behavior_version(aws_sdk_applicationautoscaling::config::BehaviorVersion::latest())
            .region(aws_sdk_applicationautoscaling::config::Region::new("us-east-1"))
            .endpoint_url(&self.url)
            .credentials_provider(aws_sdk_applicationautoscaling::config::Credentials::new(
                "t", "t", None, None, "tests",
            ))
            .build();
        aws_sdk_applicationautoscaling::Client::from_conf(config)
    }

    /// One call to a JSON-protocol service the tests have no SDK crate for
    /// (ACM): moto reads the service from the credential scope and the
    /// operation from `X-Amz-Target`, and checks no signature.
    pub async fn json_call(&self, service: &str, target: &str, body: serde_json::Value) -> serde_json::Value {
        let response = reqwest::Client::new()
            .post(&self.url)
            .header("X-Amz-Target", target)
            .header("Content-Type", "application/x-amz-json-1.1")
            .header(
                "Authorization",
                format!("AWS4-HMAC-SHA256 Credential=t/20260101/us-east-1/{service}/aws4_request, SignedHeaders=host, Signature=0"),
            )
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(response.status().is_success(), "{target}: {}", response.status());
        response.json().await.unwrap()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
