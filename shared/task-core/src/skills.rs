//! Skills: directories holding a `SKILL.md` (YAML front matter + markdown body) and optional
//! `scripts/`, `references/` and `assets/` resource files.
//!
//! Skills ship with the deployment and are small text, so [`SkillLibrary::load_dir`] reads
//! everything once at start-up and the skill tools (`list_skills`, `load_skill`,
//! `unload_skill`, `list_skill_resources`, `load_skill_resource`) are pure functions over the
//! in-memory library: they never touch the filesystem, so no tool argument can reach a path.
//!
//! Decisions where the upstream spec is silent (each is pinned by a test below):
//! - A sub-directory of the root without a `SKILL.md` is reported in the skipped list with the
//!   reason `no SKILL.md`, so that a typo (`skill.md`) is visible to the operator instead of
//!   a skill silently vanishing. Hidden entries (name starting with `.`, e.g. `.git`) and plain
//!   files at the root are ignored silently: they can never be skills.
//! - Symbolic links are never followed, anywhere: a symlinked skill directory is skipped with a
//!   reason; a symlinked `SKILL.md` makes the skill invalid; symlinked resource directories or
//!   files are ignored. Every check uses `symlink_metadata` (lstat).
//! - A resource over [`MAX_RESOURCE_BYTES`] (1 MiB) is still listed (it exists) but is not
//!   kept in memory; loading it answers `resource is too large`. A non-UTF-8 resource is
//!   listed too and answers `resource is not text`. `SKILL.md` itself has the same 1 MiB cap.
//! - A resource file whose name is not a plain, UTF-8 file name (e.g. contains `\`) is
//!   ignored, because no tool argument may address it.
//! - `null` for an optional front matter key means "absent"; a blank (whitespace-only)
//!   description counts as empty. Non-string scalars (`name: 123`) are refused, not coerced.
//! - Resource listings follow upstream order: kind `scripts`, `references`, `assets`, then file
//!   name (byte order).
//! - An I/O error inside one skill directory skips that skill with a reason; only errors on
//!   the root (reading or listing it) fail the whole load.

use std::collections::BTreeMap;
use std::fmt;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_yaml_ng::{Mapping, Value};

/// The file that makes a directory a skill.
pub const SKILL_FILE: &str = "SKILL.md";
/// Longest skill name, in characters.
pub const MAX_NAME_CHARS: usize = 64;
/// Longest description, in characters (Unicode scalar values).
pub const MAX_DESCRIPTION_CHARS: usize = 1024;
/// Longest `compatibility` text, in characters.
pub const MAX_COMPATIBILITY_CHARS: usize = 500;
/// Largest resource (and `SKILL.md`) kept in memory: 1 MiB. Skills are meant to be small
/// text read into a model context; anything bigger is almost certainly a mistake, and the
/// cap bounds the memory a deployment's skills directory can take.
pub const MAX_RESOURCE_BYTES: u64 = 1024 * 1024;

/// The front matter keys the Agent Skills format allows (upstream forbids extras).
const ALLOWED_KEYS: [&str; 6] = [
    "name",
    "description",
    "license",
    "compatibility",
    "metadata",
    "allowed-tools",
];

/// Tool-facing refusal texts (the model reads `[skill.invalid] <text>`).
const NO_SUCH_SKILL: &str = "no such skill";
const NO_SUCH_RESOURCE: &str = "no such skill resource";
const NOT_TEXT: &str = "resource is not text";
const TOO_LARGE: &str = "resource is too large";

/// One of the three resource directories of a skill. The serde names equal the directory
/// names, so the tool argument `kind` deserialises straight into it. The variant order is the
/// listing order (upstream's `RESOURCE_DIRS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResourceKind {
    Scripts,
    References,
    Assets,
}

impl ResourceKind {
    /// Every kind, in listing order.
    pub const ALL: [ResourceKind; 3] = [
        ResourceKind::Scripts,
        ResourceKind::References,
        ResourceKind::Assets,
    ];

    /// The kind named by a directory name (exact, case-sensitive).
    pub fn parse(s: &str) -> Option<ResourceKind> {
        ResourceKind::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// The directory name of this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            ResourceKind::Scripts => "scripts",
            ResourceKind::References => "references",
            ResourceKind::Assets => "assets",
        }
    }
}

impl fmt::Display for ResourceKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refusal of a skill tool. The tool result is `[skill.invalid] <message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SkillInvalid {
    pub message: String,
}

impl SkillInvalid {
    pub fn new(message: impl Into<String>) -> SkillInvalid {
        SkillInvalid {
            message: message.into(),
        }
    }

    /// The error code the model sees in `[code] message`.
    pub fn code(&self) -> &'static str {
        "skill.invalid"
    }
}

/// A skill directory that was not loaded and why (the others still load).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkippedSkill {
    pub dir: PathBuf,
    pub reason: String,
}

/// What was read for one resource file. Only text is kept; the other cases are remembered so
/// the tool can say why a listed file cannot be loaded.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Resource {
    Text(String),
    NotText,
    TooLarge,
}

impl Resource {
    fn from_bytes(bytes: Vec<u8>) -> Resource {
        if bytes.len() as u64 > MAX_RESOURCE_BYTES {
            return Resource::TooLarge;
        }
        match String::from_utf8(bytes) {
            Ok(text) => Resource::Text(text),
            Err(_) => Resource::NotText,
        }
    }
}

/// One parsed skill: front matter, body and its resources, all in memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    pub body: String,
    pub license: Option<String>,
    pub compatibility: Option<String>,
    pub metadata: BTreeMap<String, String>,
    pub allowed_tools: Vec<String>,
    resources: BTreeMap<(ResourceKind, String), Resource>,
}

impl Skill {
    /// Parses SKILL.md text (front matter + markdown body) for a skill in directory
    /// `dir_name`. The error is the reason text reported for a skipped skill.
    pub fn parse(dir_name: &str, skill_md: &str) -> Result<Skill, String> {
        let (yaml, body) = split_front_matter(skill_md)?;
        if yaml.trim().is_empty() {
            return Err("front matter is empty".to_owned());
        }
        let value: Value = serde_yaml_ng::from_str(yaml)
            .map_err(|e| format!("front matter is not valid YAML: {e}"))?;
        let map = match value {
            Value::Mapping(map) => map,
            // A comment-only block parses to null.
            Value::Null => return Err("front matter is empty".to_owned()),
            _ => return Err("front matter must be a YAML mapping".to_owned()),
        };
        // Unknown keys first: a misspelt key (`descripton`) is the likeliest mistake and the
        // most useful reason to report.
        for key in map.keys() {
            match key {
                Value::String(k) if ALLOWED_KEYS.contains(&k.as_str()) => {}
                Value::String(k) => return Err(format!("unknown front matter key `{k}`")),
                _ => return Err("front matter keys must be strings".to_owned()),
            }
        }

        let name =
            string_field(&map, "name")?.ok_or_else(|| "missing required key `name`".to_owned())?;
        validate_name(&name)?;
        if name != dir_name {
            return Err(format!(
                "`name` `{name}` does not match the directory name `{dir_name}`"
            ));
        }

        let description = string_field(&map, "description")?
            .ok_or_else(|| "missing required key `description`".to_owned())?;
        if description.trim().is_empty() {
            return Err("`description` must not be empty".to_owned());
        }
        if description.chars().count() > MAX_DESCRIPTION_CHARS {
            return Err(format!(
                "`description` is longer than {MAX_DESCRIPTION_CHARS} characters"
            ));
        }

        let license = string_field(&map, "license")?;
        let compatibility = string_field(&map, "compatibility")?;
        if let Some(c) = &compatibility
            && c.chars().count() > MAX_COMPATIBILITY_CHARS
        {
            return Err(format!(
                "`compatibility` is longer than {MAX_COMPATIBILITY_CHARS} characters"
            ));
        }
        let metadata = metadata_field(&map)?;
        let allowed_tools = match map.get("allowed-tools") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => s.split_whitespace().map(str::to_owned).collect(),
            Some(_) => return Err("`allowed-tools` must be a space-separated string".to_owned()),
        };

        Ok(Skill {
            name,
            description,
            body: body.to_owned(),
            license,
            compatibility,
            metadata,
            allowed_tools,
            resources: BTreeMap::new(),
        })
    }

    /// Adds (or replaces) a resource from its bytes, classified like the loader does: over
    /// 1 MiB is too large, non-UTF-8 is not text. Lets callers build skills without a
    /// filesystem (e.g. tool tests). Refuses a name that is not a plain file name.
    pub fn add_resource(
        &mut self,
        kind: ResourceKind,
        file: &str,
        bytes: Vec<u8>,
    ) -> Result<(), String> {
        if !is_plain_file_name(file) {
            return Err(format!("`{file}` is not a plain file name"));
        }
        self.resources
            .insert((kind, file.to_owned()), Resource::from_bytes(bytes));
        Ok(())
    }

    /// The resources, in listing order (kind, then file name).
    pub fn resources(&self) -> impl Iterator<Item = (ResourceKind, &str)> {
        self.resources.keys().map(|(k, f)| (*k, f.as_str()))
    }

    /// Lines `- <kind>/<file>` sorted, or `(no resources)`.
    pub fn resource_index(&self) -> String {
        if self.resources.is_empty() {
            return "(no resources)".to_owned();
        }
        self.resources()
            .map(|(kind, file)| format!("- {kind}/{file}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The text of one resource. Errors: "no such skill resource" (unknown, or any name that
    /// is not a plain file name: contains '/', '\\', is '.', '..', empty, NUL), "resource is
    /// not text" (not UTF-8) and "resource is too large" (over 1 MiB).
    pub fn resource(&self, kind: ResourceKind, file: &str) -> Result<&str, SkillInvalid> {
        // Defence in depth: the map can only hold plain names, but refusing traversal-shaped
        // names up front keeps that guarantee local and explicit. Same text as "unknown", so
        // a probe learns nothing.
        if !is_plain_file_name(file) {
            return Err(SkillInvalid::new(NO_SUCH_RESOURCE));
        }
        match self.resources.get(&(kind, file.to_owned())) {
            None => Err(SkillInvalid::new(NO_SUCH_RESOURCE)),
            Some(Resource::Text(text)) => Ok(text),
            Some(Resource::NotText) => Err(SkillInvalid::new(NOT_TEXT)),
            Some(Resource::TooLarge) => Err(SkillInvalid::new(TOO_LARGE)),
        }
    }
}

/// All the skills of a deployment, by name, read once at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SkillLibrary {
    skills: BTreeMap<String, Skill>,
}

impl SkillLibrary {
    pub fn empty() -> SkillLibrary {
        SkillLibrary::default()
    }

    /// A library of the given skills; a later skill with the same name replaces an earlier
    /// one. For callers that build skills in memory (tests, other skill sources).
    pub fn from_skills(skills: impl IntoIterator<Item = Skill>) -> SkillLibrary {
        SkillLibrary {
            skills: skills.into_iter().map(|s| (s.name.clone(), s)).collect(),
        }
    }

    /// Loads every immediate sub-directory of `root` that holds a SKILL.md. An invalid skill
    /// is skipped with a reason; I/O errors on `root` itself are errors. The skipped list is
    /// sorted by directory.
    pub fn load_dir(root: &Path) -> io::Result<(SkillLibrary, Vec<SkippedSkill>)> {
        let mut entries = Vec::new();
        for entry in fs::read_dir(root)? {
            let entry = entry?;
            // `DirEntry::file_type` does not follow symlinks.
            entries.push((entry.file_name(), entry.path(), entry.file_type()?));
        }
        // read_dir order is filesystem-dependent; sort for deterministic results.
        entries.sort_by(|a, b| a.0.cmp(&b.0));

        let mut skills = BTreeMap::new();
        let mut skipped = Vec::new();
        for (file_name, dir, file_type) in entries {
            if file_name.as_encoded_bytes().starts_with(b".") {
                continue;
            }
            if file_type.is_symlink() {
                skipped.push(SkippedSkill {
                    dir,
                    reason: "skill directory is a symbolic link (links are not followed)"
                        .to_owned(),
                });
                continue;
            }
            if !file_type.is_dir() {
                continue;
            }
            let Some(dir_name) = file_name.to_str() else {
                skipped.push(SkippedSkill {
                    dir,
                    reason: "directory name is not UTF-8".to_owned(),
                });
                continue;
            };
            match load_skill_dir(&dir, dir_name) {
                Ok(skill) => {
                    skills.insert(skill.name.clone(), skill);
                }
                Err(reason) => skipped.push(SkippedSkill { dir, reason }),
            }
        }
        Ok((SkillLibrary { skills }, skipped))
    }

    /// The skill called `name`, or "no such skill".
    pub fn get(&self, name: &str) -> Result<&Skill, SkillInvalid> {
        self.skills
            .get(name)
            .ok_or_else(|| SkillInvalid::new(NO_SUCH_SKILL))
    }

    /// Skill names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.skills.keys().map(String::as_str)
    }

    /// One line `- <name>: <description>` per skill sorted by name, or `(no skills)`.
    pub fn index(&self) -> String {
        if self.skills.is_empty() {
            return "(no skills)".to_owned();
        }
        self.skills
            .values()
            .map(|s| format!("- {}: {}", s.name, s.description))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Splits `---\n<yaml>---\n<body>`; the fences may carry trailing whitespace or `\r`, and a
/// leading BOM is ignored. One leading newline of the body is trimmed (the blank line that
/// conventionally follows the closing fence).
fn split_front_matter(text: &str) -> Result<(&str, &str), String> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let is_fence = |line: &str| line.trim_end() == "---";
    let mut lines = text.split_inclusive('\n');
    match lines.next() {
        Some(first) if is_fence(first) => {
            let start = first.len();
            let mut offset = start;
            for line in lines {
                if is_fence(line) {
                    let body = &text[offset + line.len()..];
                    let body = body
                        .strip_prefix("\r\n")
                        .or_else(|| body.strip_prefix('\n'))
                        .unwrap_or(body);
                    return Ok((&text[start..offset], body));
                }
                offset += line.len();
            }
            Err("front matter has no closing `---` line".to_owned())
        }
        _ => Err("SKILL.md must start with a `---` front matter line".to_owned()),
    }
}

/// An optional string key: absent or `null` is `None`; any other non-string is refused.
fn string_field(map: &Mapping, key: &str) -> Result<Option<String>, String> {
    match map.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

fn metadata_field(map: &Mapping) -> Result<BTreeMap<String, String>, String> {
    let refuse = || "`metadata` must be a map of strings to strings".to_owned();
    match map.get("metadata") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Mapping(m)) => m
            .iter()
            .map(|(k, v)| match (k, v) {
                (Value::String(k), Value::String(v)) => Ok((k.clone(), v.clone())),
                _ => Err(refuse()),
            })
            .collect(),
        Some(_) => Err(refuse()),
    }
}

/// `^[a-z0-9]+(-[a-z0-9]+)*$`, at most 64 characters.
fn validate_name(name: &str) -> Result<(), String> {
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("`name` is longer than {MAX_NAME_CHARS} characters"));
    }
    // The pattern is exactly: non-empty hyphen-separated segments of [a-z0-9].
    let valid = name.split('-').all(|segment| {
        !segment.is_empty()
            && segment
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    });
    if !valid {
        return Err(format!(
            "`name` `{name}` must match ^[a-z0-9]+(-[a-z0-9]+)*$ \
             (lowercase letters and digits, single hyphens between them)"
        ));
    }
    Ok(())
}

/// A name that can only mean a file directly inside one directory: no separators, no
/// `.`/`..`, not empty, no NUL. Applied to tool arguments and to names found on disk.
fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0'])
}

/// Reads a whole file, but at most `limit + 1` bytes: `None` means larger than `limit`.
fn read_bounded(path: &Path, limit: u64) -> io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    fs::File::open(path)?
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// Loads one skill directory; the error is the skip reason.
fn load_skill_dir(dir: &Path, dir_name: &str) -> Result<Skill, String> {
    let path = dir.join(SKILL_FILE);
    let meta = match fs::symlink_metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Err("no SKILL.md".to_owned()),
        Err(e) => return Err(format!("cannot read SKILL.md: {e}")),
    };
    if !meta.is_file() {
        return Err("SKILL.md is not a regular file (symbolic links are not followed)".to_owned());
    }
    let bytes = read_bounded(&path, MAX_RESOURCE_BYTES)
        .map_err(|e| format!("cannot read SKILL.md: {e}"))?
        .ok_or_else(|| "SKILL.md is larger than 1 MiB".to_owned())?;
    let text = String::from_utf8(bytes).map_err(|_| "SKILL.md is not UTF-8 text".to_owned())?;
    let mut skill = Skill::parse(dir_name, &text)?;
    load_resources(dir, &mut skill)?;
    Ok(skill)
}

/// Collects regular files exactly one level deep under the three resource directories.
/// Deeper files, other directories and every symlink are ignored, so nothing outside the
/// skill directory can be read.
fn load_resources(dir: &Path, skill: &mut Skill) -> Result<(), String> {
    for kind in ResourceKind::ALL {
        let kind_dir = dir.join(kind.as_str());
        match fs::symlink_metadata(&kind_dir) {
            Ok(meta) if meta.is_dir() => {}
            // Absent, a symlink, or a plain file: no resources of this kind.
            Ok(_) => continue,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("cannot read {kind}/: {e}")),
        }
        let entries = fs::read_dir(&kind_dir).map_err(|e| format!("cannot read {kind}/: {e}"))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {kind}/: {e}"))?;
            let file_name = entry.file_name();
            let Some(file) = file_name.to_str().filter(|f| is_plain_file_name(f)) else {
                continue;
            };
            let path = entry.path();
            let meta = fs::symlink_metadata(&path)
                .map_err(|e| format!("cannot read {kind}/{file}: {e}"))?;
            if !meta.is_file() {
                continue;
            }
            let resource = match read_bounded(&path, MAX_RESOURCE_BYTES)
                .map_err(|e| format!("cannot read {kind}/{file}: {e}"))?
            {
                Some(bytes) => Resource::from_bytes(bytes),
                None => Resource::TooLarge,
            };
            skill.resources.insert((kind, file.to_owned()), resource);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tempfile::TempDir;

    /// Writes `contents` at `root/rel`, creating parent directories.
    fn write(root: &Path, rel: &str, contents: impl AsRef<[u8]>) {
        let path = root.join(rel);
        fs::create_dir_all(path.parent().expect("has a parent")).expect("mkdir");
        fs::write(path, contents).expect("write");
    }

    fn md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nBody.\n")
    }

    /// Parses front matter lines for a skill `demo` with the standard body.
    fn parse_fm(front_matter: &str) -> Result<Skill, String> {
        Skill::parse("demo", &format!("---\n{front_matter}---\nbody\n"))
    }

    fn reason_of(front_matter: &str) -> String {
        parse_fm(front_matter).expect_err("refused")
    }

    fn load(root: &Path) -> (SkillLibrary, Vec<SkippedSkill>) {
        SkillLibrary::load_dir(root).expect("root readable")
    }

    /// Loads a root holding the skill `demo` (description `d`) and `files` (paths from the
    /// root); the directory lasts as long as the returned `TempDir`.
    fn demo_with(files: &[(&str, &[u8])]) -> (TempDir, SkillLibrary, Vec<SkippedSkill>) {
        let root = TempDir::new().expect("tmp");
        write(root.path(), "demo/SKILL.md", md("demo", "d"));
        for (rel, contents) in files {
            write(root.path(), rel, contents);
        }
        let (lib, skipped) = load(root.path());
        (root, lib, skipped)
    }

    fn invalid(message: &str) -> SkillInvalid {
        SkillInvalid::new(message)
    }

    // ---- parsing: the happy path ----

    #[test]
    fn parses_all_keys_and_trims_one_leading_newline_of_the_body() {
        let text = "---\nname: pdf-tools\ndescription: Work with PDFs.\nlicense: Apache-2.0\n\
                    compatibility: needs python3\nmetadata:\n  author: me\n  version: \"1.0\"\n\
                    allowed-tools: Bash(git:*)  Read\n---\n\n\n# PDF\n";
        let skill = Skill::parse("pdf-tools", text).expect("valid");
        assert_eq!(skill.name, "pdf-tools");
        assert_eq!(skill.description, "Work with PDFs.");
        // Only one newline is trimmed: the second blank line is part of the body.
        assert_eq!(skill.body, "\n# PDF\n");
        assert_eq!(skill.license.as_deref(), Some("Apache-2.0"));
        assert_eq!(skill.compatibility.as_deref(), Some("needs python3"));
        assert_eq!(
            skill.metadata,
            BTreeMap::from([
                ("author".to_owned(), "me".to_owned()),
                ("version".to_owned(), "1.0".to_owned())
            ])
        );
        assert_eq!(skill.allowed_tools, vec!["Bash(git:*)", "Read"]);
        assert_eq!(skill.resource_index(), "(no resources)");
    }

    #[test]
    fn optional_keys_default_and_null_means_absent() {
        let skill = parse_fm(
            "name: demo\ndescription: d\nlicense: null\ncompatibility:\nmetadata: ~\n\
             allowed-tools:\n",
        )
        .expect("valid");
        assert_eq!(skill.license, None);
        assert_eq!(skill.compatibility, None);
        assert!(skill.metadata.is_empty());
        assert!(skill.allowed_tools.is_empty());
        assert_eq!(skill.body, "body\n");
    }

    #[test]
    fn crlf_fences_bom_and_a_body_without_blank_line_are_accepted() {
        let text = "\u{feff}---\r\nname: demo\r\ndescription: d\r\n---\r\n\r\nText\r\n";
        let skill = Skill::parse("demo", text).expect("valid");
        assert_eq!(skill.description, "d");
        assert_eq!(skill.body, "Text\r\n");
        // Closing fence at end of file with no newline: empty body.
        let skill = Skill::parse("demo", "---\nname: demo\ndescription: d\n---").expect("valid");
        assert_eq!(skill.body, "");
    }

    #[test]
    fn a_fence_inside_the_body_stays_in_the_body() {
        let skill = Skill::parse("demo", "---\nname: demo\ndescription: d\n---\na\n---\nb\n")
            .expect("valid");
        assert_eq!(skill.body, "a\n---\nb\n");
    }

    // ---- parsing: every refusal with its exact reason ----

    #[test]
    fn missing_front_matter_is_refused() {
        let want = "SKILL.md must start with a `---` front matter line";
        assert_eq!(
            Skill::parse("demo", "# Just markdown\n").expect_err("x"),
            want
        );
        assert_eq!(Skill::parse("demo", "").expect_err("x"), want);
        // The fence must be the very first line.
        assert_eq!(
            Skill::parse("demo", "\n---\nname: demo\ndescription: d\n---\n").expect_err("x"),
            want
        );
    }

    #[test]
    fn unclosed_front_matter_is_refused() {
        assert_eq!(
            Skill::parse("demo", "---\nname: demo\ndescription: d\n").expect_err("x"),
            "front matter has no closing `---` line"
        );
    }

    #[test]
    fn empty_front_matter_is_refused() {
        assert_eq!(reason_of(""), "front matter is empty");
        assert_eq!(reason_of("# only a comment\n"), "front matter is empty");
    }

    #[test]
    fn invalid_yaml_is_refused() {
        let reason = reason_of("name: demo\ndescription: [unclosed\n");
        assert!(
            reason.starts_with("front matter is not valid YAML: "),
            "{reason}"
        );
        // Duplicate keys are a YAML error too, not "last one wins".
        let reason = reason_of("name: demo\nname: demo\ndescription: d\n");
        assert!(
            reason.starts_with("front matter is not valid YAML: "),
            "{reason}"
        );
    }

    #[test]
    fn front_matter_must_be_a_mapping() {
        assert_eq!(
            reason_of("- name\n- description\n"),
            "front matter must be a YAML mapping"
        );
        assert_eq!(
            reason_of("just text\n"),
            "front matter must be a YAML mapping"
        );
    }

    #[test]
    fn unknown_and_non_string_keys_are_refused() {
        assert_eq!(
            reason_of("name: demo\ndescription: d\nversion: 2\n"),
            "unknown front matter key `version`"
        );
        // The underscore spelling is not an alias of `allowed-tools`.
        assert_eq!(
            reason_of("name: demo\ndescription: d\nallowed_tools: Read\n"),
            "unknown front matter key `allowed_tools`"
        );
        assert_eq!(
            reason_of("name: demo\ndescription: d\n1: x\n"),
            "front matter keys must be strings"
        );
    }

    #[test]
    fn name_is_required_and_a_string() {
        assert_eq!(reason_of("description: d\n"), "missing required key `name`");
        assert_eq!(
            reason_of("name:\ndescription: d\n"),
            "missing required key `name`"
        );
        assert_eq!(
            reason_of("name: 123\ndescription: d\n"),
            "`name` must be a string"
        );
    }

    #[test]
    fn bad_names_are_refused() {
        for bad in [
            "Demo", "de_mo", "-demo", "demo-", "de--mo", "dé", "de mo", "''",
        ] {
            let reason = Skill::parse(bad, &format!("---\nname: {bad}\ndescription: d\n---\n"))
                .expect_err(bad);
            assert!(
                reason.ends_with(
                    "must match ^[a-z0-9]+(-[a-z0-9]+)*$ \
                     (lowercase letters and digits, single hyphens between them)"
                ),
                "{bad}: {reason}"
            );
        }
        assert_eq!(
            Skill::parse("Demo", "---\nname: Demo\ndescription: d\n---\n").expect_err("x"),
            "`name` `Demo` must match ^[a-z0-9]+(-[a-z0-9]+)*$ \
             (lowercase letters and digits, single hyphens between them)"
        );
        // Quoted, because YAML reads a bare `0` as a number (refused as not a string).
        for good in ["a", "0", "a-b-c", "pdf2-x9"] {
            Skill::parse(good, &format!("---\nname: '{good}'\ndescription: d\n---\n")).expect(good);
        }
    }

    #[test]
    fn name_longer_than_64_is_refused() {
        let ok = "a".repeat(64);
        Skill::parse(&ok, &md(&ok, "d")).expect("64 is fine");
        let long = "a".repeat(65);
        assert_eq!(
            Skill::parse(&long, &md(&long, "d")).expect_err("65"),
            "`name` is longer than 64 characters"
        );
    }

    #[test]
    fn name_must_equal_the_directory_name() {
        assert_eq!(
            Skill::parse("other", &md("demo", "d")).expect_err("x"),
            "`name` `demo` does not match the directory name `other`"
        );
    }

    #[test]
    fn description_is_required_non_empty_and_at_most_1024_chars() {
        assert_eq!(
            reason_of("name: demo\n"),
            "missing required key `description`"
        );
        assert_eq!(
            reason_of("name: demo\ndescription: 5\n"),
            "`description` must be a string"
        );
        assert_eq!(
            reason_of("name: demo\ndescription: ''\n"),
            "`description` must not be empty"
        );
        assert_eq!(
            reason_of("name: demo\ndescription: '   '\n"),
            "`description` must not be empty"
        );
        // Counted in characters, not bytes: 1024 two-byte characters are fine.
        parse_fm(&format!("name: demo\ndescription: {}\n", "é".repeat(1024))).expect("1024");
        assert_eq!(
            reason_of(&format!("name: demo\ndescription: {}\n", "x".repeat(1025))),
            "`description` is longer than 1024 characters"
        );
    }

    #[test]
    fn optional_keys_are_type_and_length_checked() {
        assert_eq!(
            reason_of("name: demo\ndescription: d\nlicense: [MIT]\n"),
            "`license` must be a string"
        );
        assert_eq!(
            reason_of("name: demo\ndescription: d\ncompatibility: 3\n"),
            "`compatibility` must be a string"
        );
        parse_fm(&format!(
            "name: demo\ndescription: d\ncompatibility: {}\n",
            "c".repeat(500)
        ))
        .expect("500");
        assert_eq!(
            reason_of(&format!(
                "name: demo\ndescription: d\ncompatibility: {}\n",
                "c".repeat(501)
            )),
            "`compatibility` is longer than 500 characters"
        );
        let want = "`metadata` must be a map of strings to strings";
        assert_eq!(reason_of("name: demo\ndescription: d\nmetadata: x\n"), want);
        assert_eq!(
            reason_of("name: demo\ndescription: d\nmetadata:\n  version: 1.0\n"),
            want
        );
        assert_eq!(
            reason_of("name: demo\ndescription: d\nmetadata:\n  1: one\n"),
            want
        );
        assert_eq!(
            reason_of("name: demo\ndescription: d\nallowed-tools: [Read, Bash]\n"),
            "`allowed-tools` must be a space-separated string"
        );
    }

    // ---- loading a directory ----

    #[test]
    fn loads_a_valid_skill_with_resources_of_each_kind() {
        let root = TempDir::new().expect("tmp");
        let r = root.path();
        write(r, "demo/SKILL.md", md("demo", "A demo."));
        write(r, "demo/scripts/run.sh", "echo hi\n");
        write(r, "demo/references/b.md", "B");
        write(r, "demo/references/a.md", "A");
        write(r, "demo/assets/template.txt", "T");
        let (lib, skipped) = load(r);
        assert!(skipped.is_empty(), "{skipped:?}");
        let skill = lib.get("demo").expect("loaded");
        assert_eq!(skill.body, "# demo\n\nBody.\n");
        // Upstream order: scripts, references, assets; files sorted within a kind.
        assert_eq!(
            skill.resource_index(),
            "- scripts/run.sh\n- references/a.md\n- references/b.md\n- assets/template.txt"
        );
        assert_eq!(
            skill.resource(ResourceKind::Scripts, "run.sh"),
            Ok("echo hi\n")
        );
        assert_eq!(skill.resource(ResourceKind::References, "a.md"), Ok("A"));
        assert_eq!(
            skill.resource(ResourceKind::Assets, "template.txt"),
            Ok("T")
        );
        // The kind is part of the address.
        assert_eq!(
            skill.resource(ResourceKind::Assets, "a.md"),
            Err(invalid("no such skill resource"))
        );
        assert_eq!(
            skill.resource(ResourceKind::References, "missing.md"),
            Err(invalid("no such skill resource"))
        );
    }

    #[test]
    fn nested_files_other_dirs_and_top_level_files_are_not_resources() {
        let (_root, lib, skipped) = demo_with(&[
            ("demo/references/sub/deep.md", b"deep"),
            ("demo/other/file.md", b"other"),
            ("demo/notes.md", b"top level"),
            // A resource directory name that is a file, not a directory.
            ("demo/assets", b"not a dir"),
        ]);
        assert!(skipped.is_empty(), "{skipped:?}");
        let skill = lib.get("demo").expect("loaded");
        assert_eq!(skill.resource_index(), "(no resources)");
        assert_eq!(
            skill.resource(ResourceKind::References, "sub"),
            Err(invalid("no such skill resource"))
        );
    }

    #[cfg(unix)]
    #[test]
    fn symlinks_are_never_followed() {
        use std::os::unix::fs::symlink;
        let outside = TempDir::new().expect("tmp");
        write(outside.path(), "secret.txt", "SECRET");
        write(outside.path(), "dir/secret.txt", "SECRET");
        write(outside.path(), "linked/SKILL.md", md("linked", "d"));
        let root = TempDir::new().expect("tmp");
        let r = root.path();
        write(r, "demo/SKILL.md", md("demo", "d"));
        write(r, "demo/references/real.md", "real");
        // A file link pointing outside the skill root.
        symlink(
            outside.path().join("secret.txt"),
            r.join("demo/references/secret.txt"),
        )
        .expect("link");
        // A whole resource directory that is a link.
        symlink(outside.path().join("dir"), r.join("demo/scripts")).expect("link");
        // A skill directory that is a link.
        symlink(outside.path().join("linked"), r.join("linked")).expect("link");
        // A SKILL.md that is a link.
        fs::create_dir(r.join("md-link")).expect("mkdir");
        symlink(
            outside.path().join("linked/SKILL.md"),
            r.join("md-link/SKILL.md"),
        )
        .expect("link");

        let (lib, skipped) = load(r);
        let skill = lib.get("demo").expect("loaded");
        assert_eq!(skill.resource_index(), "- references/real.md");
        assert_eq!(
            skill.resource(ResourceKind::References, "secret.txt"),
            Err(invalid("no such skill resource"))
        );
        assert_eq!(lib.names().collect::<Vec<_>>(), vec!["demo"]);
        assert_eq!(
            skipped,
            vec![
                SkippedSkill {
                    dir: r.join("linked"),
                    reason: "skill directory is a symbolic link (links are not followed)"
                        .to_owned()
                },
                SkippedSkill {
                    dir: r.join("md-link"),
                    reason: "SKILL.md is not a regular file (symbolic links are not followed)"
                        .to_owned()
                },
            ]
        );
    }

    #[test]
    fn traversal_shaped_names_are_refused() {
        let (_root, lib, _) = demo_with(&[
            ("demo/references/a.md", b"A"),
            ("secret", b"SECRET"),
            ("demo/SKILL.md.bak", b"x"),
        ]);
        let skill = lib.get("demo").expect("loaded");
        for name in [
            "../secret",
            "../../secret",
            "a/b",
            "../SKILL.md",
            "..\\SKILL.md",
            "a.md/",
            "/etc/passwd",
            ".",
            "..",
            "",
            "a.md\0",
        ] {
            assert_eq!(
                skill.resource(ResourceKind::References, name),
                Err(invalid("no such skill resource")),
                "{name:?}"
            );
        }
    }

    #[cfg(unix)]
    #[test]
    fn files_with_a_backslash_in_their_name_are_ignored() {
        // On Unix `\` is an ordinary file name character; such a file could never be
        // addressed safely, so the loader does not list it.
        let (_root, lib, _) = demo_with(&[("demo/references/a\\b.md", b"x")]);
        let skill = lib.get("demo").expect("loaded");
        assert_eq!(skill.resource_index(), "(no resources)");
        assert_eq!(
            skill.resource(ResourceKind::References, "a\\b.md"),
            Err(invalid("no such skill resource"))
        );
    }

    #[test]
    fn binary_resource_is_listed_but_not_text() {
        let (_root, lib, _) = demo_with(&[(
            "demo/assets/logo.png",
            &[0x89, b'P', b'N', b'G', 0xff, 0xfe],
        )]);
        let skill = lib.get("demo").expect("loaded");
        assert_eq!(skill.resource_index(), "- assets/logo.png");
        assert_eq!(
            skill.resource(ResourceKind::Assets, "logo.png"),
            Err(invalid("resource is not text"))
        );
    }

    #[test]
    fn resource_over_1_mib_is_listed_but_too_large() {
        let limit = usize::try_from(MAX_RESOURCE_BYTES).expect("fits");
        let (_root, lib, _) = demo_with(&[
            ("demo/assets/exact.txt", "a".repeat(limit).as_bytes()),
            ("demo/assets/big.txt", "a".repeat(limit + 1).as_bytes()),
        ]);
        let skill = lib.get("demo").expect("loaded");
        assert_eq!(
            skill.resource_index(),
            "- assets/big.txt\n- assets/exact.txt"
        );
        assert_eq!(
            skill
                .resource(ResourceKind::Assets, "exact.txt")
                .map(str::len),
            Ok(limit)
        );
        assert_eq!(
            skill.resource(ResourceKind::Assets, "big.txt"),
            Err(invalid("resource is too large"))
        );
    }

    #[test]
    fn one_invalid_skill_does_not_stop_the_others() {
        let root = TempDir::new().expect("tmp");
        let r = root.path();
        write(r, "alpha/SKILL.md", md("alpha", "First."));
        write(r, "bad-name/SKILL.md", md("other", "Mismatch."));
        write(r, "broken/SKILL.md", "no front matter");
        write(r, "zeta/SKILL.md", md("zeta", "Last."));
        let (lib, skipped) = load(r);
        assert_eq!(lib.names().collect::<Vec<_>>(), vec!["alpha", "zeta"]);
        assert_eq!(lib.index(), "- alpha: First.\n- zeta: Last.");
        assert_eq!(
            skipped,
            vec![
                SkippedSkill {
                    dir: r.join("bad-name"),
                    reason: "`name` `other` does not match the directory name `bad-name`"
                        .to_owned()
                },
                SkippedSkill {
                    dir: r.join("broken"),
                    reason: "SKILL.md must start with a `---` front matter line".to_owned()
                },
            ]
        );
    }

    #[test]
    fn a_directory_without_skill_md_is_skipped_with_a_reason() {
        let root = TempDir::new().expect("tmp");
        let r = root.path();
        write(r, "typo/skill.md", md("typo", "d"));
        let (lib, skipped) = load(r);
        assert_eq!(lib.index(), "(no skills)");
        assert_eq!(
            skipped,
            vec![SkippedSkill {
                dir: r.join("typo"),
                reason: "no SKILL.md".to_owned()
            }]
        );
    }

    #[test]
    fn hidden_entries_and_root_files_are_ignored_silently() {
        let root = TempDir::new().expect("tmp");
        let r = root.path();
        write(r, ".git/HEAD", "ref");
        write(r, ".hidden/SKILL.md", md("hidden", "d"));
        write(r, "README.md", "# skills");
        let (lib, skipped) = load(r);
        assert_eq!(lib.index(), "(no skills)");
        assert!(skipped.is_empty(), "{skipped:?}");
    }

    #[test]
    fn skill_md_that_is_not_utf8_too_large_or_a_directory_is_skipped() {
        let root = TempDir::new().expect("tmp");
        let r = root.path();
        let limit = usize::try_from(MAX_RESOURCE_BYTES).expect("fits");
        write(r, "binary/SKILL.md", [b'-', b'-', b'-', b'\n', 0xff, 0xfe]);
        let mut huge = md("huge", "d");
        huge.push_str(&"x".repeat(limit));
        write(r, "huge/SKILL.md", huge);
        fs::create_dir_all(r.join("dirmd/SKILL.md")).expect("mkdir");
        let (lib, skipped) = load(r);
        assert_eq!(lib.index(), "(no skills)");
        let reasons: Vec<_> = skipped.iter().map(|s| s.reason.as_str()).collect();
        assert_eq!(
            reasons,
            vec![
                "SKILL.md is not UTF-8 text",
                "SKILL.md is not a regular file (symbolic links are not followed)",
                "SKILL.md is larger than 1 MiB",
            ]
        );
    }

    #[test]
    fn a_missing_root_is_an_io_error() {
        let root = TempDir::new().expect("tmp");
        let err = SkillLibrary::load_dir(&root.path().join("nope")).expect_err("missing");
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
    }

    #[test]
    fn the_shipped_skills_directory_loads_cleanly() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../skills");
        let (lib, skipped) = load(&root);
        assert!(skipped.is_empty(), "{skipped:?}");
        let skill = lib.get("summarize").expect("summarize ships");
        assert!(skill.body.starts_with("# Summarize"), "{}", skill.body);
        assert_eq!(skill.resource_index(), "- references/summary-template.md");
        let template = skill
            .resource(ResourceKind::References, "summary-template.md")
            .expect("text");
        assert!(template.contains("## Decisions"), "{template}");
    }

    // ---- library and tool-facing texts ----

    #[test]
    fn empty_library_and_unknown_skill() {
        let lib = SkillLibrary::empty();
        assert_eq!(lib.index(), "(no skills)");
        assert_eq!(lib.names().count(), 0);
        let err = lib.get("demo").expect_err("none");
        assert_eq!(err, invalid("no such skill"));
        assert_eq!(err.code(), "skill.invalid");
        assert_eq!(err.to_string(), "no such skill");
        assert_eq!(
            format!("[{}] {err}", err.code()),
            "[skill.invalid] no such skill"
        );
    }

    #[test]
    fn in_memory_skills_and_resources() {
        let mut b = Skill::parse("b", &md("b", "Bee.")).expect("valid");
        b.add_resource(ResourceKind::References, "r.md", b"R".to_vec())
            .expect("plain");
        b.add_resource(ResourceKind::Assets, "x.bin", vec![0xff])
            .expect("plain");
        assert_eq!(
            b.add_resource(ResourceKind::Assets, "../x", vec![]),
            Err("`../x` is not a plain file name".to_owned())
        );
        assert_eq!(
            b.add_resource(ResourceKind::Assets, "a\\b", vec![]),
            Err("`a\\b` is not a plain file name".to_owned())
        );
        let a = Skill::parse("a", &md("a", "Ay.")).expect("valid");
        let lib = SkillLibrary::from_skills([b, a]);
        assert_eq!(lib.index(), "- a: Ay.\n- b: Bee.");
        let b = lib.get("b").expect("present");
        assert_eq!(
            b.resources().collect::<Vec<_>>(),
            vec![
                (ResourceKind::References, "r.md"),
                (ResourceKind::Assets, "x.bin")
            ]
        );
        assert_eq!(b.resource(ResourceKind::References, "r.md"), Ok("R"));
        assert_eq!(
            b.resource(ResourceKind::Assets, "x.bin"),
            Err(invalid("resource is not text"))
        );
    }

    #[test]
    fn resource_kind_names_match_directories_and_serde() {
        for kind in ResourceKind::ALL {
            assert_eq!(ResourceKind::parse(kind.as_str()), Some(kind));
            assert_eq!(
                serde_json::to_value(kind).expect("serialise"),
                serde_json::json!(kind.as_str())
            );
            let back: ResourceKind =
                serde_json::from_value(serde_json::json!(kind.as_str())).expect("deserialise");
            assert_eq!(back, kind);
        }
        assert_eq!(ResourceKind::parse("Scripts"), None);
        assert_eq!(ResourceKind::parse("script"), None);
        assert_eq!(ResourceKind::parse(""), None);
        assert_eq!(
            ResourceKind::ALL.map(ResourceKind::as_str),
            ["scripts", "references", "assets"]
        );
    }

    proptest! {
        /// Parsing never panics, whatever the text.
        #[test]
        fn parse_never_panics(text in "\\PC*") {
            let _ = Skill::parse("demo", &text);
        }

        /// Any name holding a separator is refused, whatever else it holds.
        #[test]
        fn names_with_separators_are_always_refused(
            pre in "[a-z./]{0,8}",
            sep in prop::sample::select(vec!["/", "\\", "\0"]),
            post in "[a-z./]{0,8}",
        ) {
            let mut skill = Skill::parse("demo", &md("demo", "d")).expect("valid");
            let name = format!("{pre}{sep}{post}");
            prop_assert!(skill.add_resource(ResourceKind::Scripts, &name, vec![]).is_err());
            prop_assert_eq!(
                skill.resource(ResourceKind::Scripts, &name),
                Err(SkillInvalid::new("no such skill resource"))
            );
        }

        /// Every valid-pattern name up to 64 characters parses when it names its directory.
        #[test]
        fn valid_names_parse(name in "[a-z0-9]{1,10}(-[a-z0-9]{1,10}){0,4}") {
            let text = format!("---\nname: '{name}'\ndescription: d\n---\n");
            let skill = Skill::parse(&name, &text);
            prop_assert!(skill.is_ok(), "{:?}", skill);
        }
    }
}
