//! Credentials and region from the AWS shared files (`~/.aws/credentials`, `~/.aws/config`)
//! for `AWS_PROFILE` (or `default`): the one link of the standard credential chain that
//! object_store leaves out. Only static keys are read; SSO and process credentials are not.

use std::collections::HashMap;

#[derive(Debug, Default, Clone, PartialEq)]
pub struct Profile {
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub session_token: Option<String>,
    pub region: Option<String>,
}

pub fn load_profile() -> Profile {
    let home = std::env::var("HOME").unwrap_or_default();
    let name = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    let credentials = std::env::var("AWS_SHARED_CREDENTIALS_FILE")
        .unwrap_or_else(|_| format!("{home}/.aws/credentials"));
    let config = std::env::var("AWS_CONFIG_FILE").unwrap_or_else(|_| format!("{home}/.aws/config"));
    let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
    profile_from(&name, &read(&credentials), &read(&config))
}

/// The profile `name` from the two files' text (in config, sections are `[profile name]`).
pub fn profile_from(name: &str, credentials: &str, config: &str) -> Profile {
    let keys = section(credentials, name);
    let config_name = if name == "default" {
        "default".to_string()
    } else {
        format!("profile {name}")
    };
    let settings = section(config, &config_name);
    let get = |key: &str| keys.get(key).or_else(|| settings.get(key)).cloned();
    Profile {
        access_key_id: get("aws_access_key_id"),
        secret_access_key: get("aws_secret_access_key"),
        session_token: get("aws_session_token"),
        region: settings
            .get("region")
            .or_else(|| keys.get("region"))
            .cloned(),
    }
}

fn section(text: &str, name: &str) -> HashMap<String, String> {
    let mut inside = false;
    let mut values = HashMap::new();
    for line in text.lines().map(str::trim) {
        if line.starts_with('[') && line.ends_with(']') {
            inside = line[1..line.len() - 1].trim() == name;
        } else if inside && !line.starts_with('#') && !line.starts_with(';') {
            if let Some((key, value)) = line.split_once('=') {
                values.insert(key.trim().to_lowercase(), value.trim().to_string());
            }
        }
    }
    values
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_profile_takes_keys_and_region() {
        let credentials = "[default]\naws_access_key_id = A\naws_secret_access_key = B\n[work]\naws_access_key_id=C\naws_secret_access_key=D\n";
        let config = "[default]\nregion = us-east-1\n[profile work]\nregion = eu-west-1\n";
        let work = profile_from("work", credentials, config);
        assert_eq!(work.access_key_id.as_deref(), Some("C"));
        assert_eq!(work.region.as_deref(), Some("eu-west-1"));
        assert_eq!(
            profile_from("default", credentials, config)
                .access_key_id
                .as_deref(),
            Some("A")
        );
        assert_eq!(
            profile_from("missing", credentials, config),
            Profile::default()
        );
    }
}
