//! The resource model: a tree of sites, hosts, links, lambdas and their
//! sub-circuits, each with a stable slug-path id (`cern/starlight-lambda/1g-a`)
//! whose prefixes are its ancestors, so the hierarchy can be read from the id
//! alone (the database uses this: see `docs/testbed.md`). Booking a resource
//! conflicts with booking any ancestor or descendant of it (DataTAG's 2.5
//! Gbit/s circuit split into two 1 Gbit/s circuits: the halves do not
//! conflict with each other, but each conflicts with the whole). Resources are
//! discovered from topology files ([`Inventory::from_topologies`]) and read
//! from an inventory file for real equipment ([`Inventory::extend_from_toml`]),
//! with errors that name the file, line and field.

use std::collections::BTreeMap;
use std::fmt;

use longhaul_topology::Topology;
use serde::{Deserialize, Serialize};

/// A resource id: slug segments (`[a-z0-9-]`, not starting or ending with
/// `-`) joined by `/`. The parent of `a/b/c` is `a/b`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ResourceId(String);

impl ResourceId {
    /// Checks and wraps an id.
    pub fn parse(s: &str) -> Result<Self, InventoryError> {
        let bad = |why: &str| InventoryError::new(format!("resource id {s:?} {why}"));
        if s.is_empty() {
            return Err(bad("is empty"));
        }
        if s.len() > 200 {
            return Err(bad("is longer than 200 bytes"));
        }
        for seg in s.split('/') {
            if seg.is_empty() {
                return Err(bad(
                    "has an empty segment (ids look like site/link/circuit)",
                ));
            }
            if !seg
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            {
                return Err(bad("may use only a-z, 0-9, '-' and '/'"));
            }
            if seg.starts_with('-') || seg.ends_with('-') {
                return Err(bad("has a segment starting or ending with '-'"));
            }
        }
        Ok(Self(s.to_owned()))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The parent id (`None` at the top).
    pub fn parent(&self) -> Option<ResourceId> {
        self.0.rsplit_once('/').map(|(p, _)| Self(p.to_owned()))
    }

    /// The child id `self/segment` (the segment is slugged).
    pub fn child(&self, segment: &str) -> ResourceId {
        Self(format!("{}/{}", self.0, slug(segment)))
    }

    /// True when `self` is `other` or one of its ancestors.
    pub fn is_ancestor_or_self_of(&self, other: &ResourceId) -> bool {
        other.0 == self.0
            || (other.0.len() > self.0.len()
                && other.0.starts_with(&self.0)
                && other.0.as_bytes()[self.0.len()] == b'/')
    }

    /// True when bookings of the two can never overlap: one is an ancestor
    /// or self of the other.
    pub fn conflicts_with(&self, other: &ResourceId) -> bool {
        self.is_ancestor_or_self_of(other) || other.is_ancestor_or_self_of(self)
    }

    /// Self and every ancestor, nearest first (`a/b/c`, `a/b`, `a`).
    pub fn self_and_ancestors(&self) -> Vec<ResourceId> {
        let mut out = vec![self.clone()];
        let mut cur = self.parent();
        while let Some(p) = cur {
            cur = p.parent();
            out.push(p);
        }
        out
    }
}

impl TryFrom<String> for ResourceId {
    type Error = InventoryError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<ResourceId> for String {
    fn from(id: ResourceId) -> String {
        id.0
    }
}

impl fmt::Display for ResourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Turns a label into an id segment: lowercase ASCII letters and digits,
/// every other run of characters becomes one `-` ("CERN host" → `cern-host`).
pub fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.is_empty() && !out.ends_with('-') {
            out.push('-');
        }
    }
    while out.ends_with('-') {
        out.pop();
    }
    if out.is_empty() { "x".into() } else { out }
}

/// What a resource is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResourceKind {
    /// A place (a city, an exchange point); booking it books everything there.
    Site,
    /// An end host or router that can be booked on its own.
    Host,
    /// A network path (an emulated topology or a real circuit).
    Link,
    /// A wavelength or SONET/SDH circuit on a link.
    Lambda,
    /// A sub-circuit of a lambda (a 1 Gbit/s half of a 2.5 Gbit/s circuit).
    Circuit,
    /// A switch or router port.
    Port,
}

/// Whether a resource can be booked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(tag = "state", rename_all = "lowercase")]
pub enum ResourceState {
    /// Bookable.
    #[default]
    Available,
    /// Bookable, but every booking is warned (a failed port, a flapping
    /// circuit).
    Degraded {
        /// Why, for the warning.
        reason: String,
    },
    /// Not bookable.
    Maintenance {
        /// Why, for the refusal.
        reason: String,
    },
}

/// One bookable thing.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    /// Stable slug path.
    pub id: ResourceId,
    /// What it is.
    pub kind: ResourceKind,
    /// Human label.
    pub name: String,
    /// The enclosing resource (always `id.parent()`; kept for readers).
    pub parent: Option<ResourceId>,
    /// Capacity in bit/s, for links and circuits.
    pub capacity_bps: Option<u64>,
    /// Bookable, degraded or in maintenance.
    #[serde(flatten)]
    pub state: ResourceState,
    /// IANA time zone of a site ("Europe/Zurich"): bookings that span a
    /// DST change there are warned about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Router hops of a discovered link, in path order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hops: Vec<String>,
}

impl Resource {
    /// An available resource with no capacity, zone or hops.
    pub fn new(id: ResourceId, kind: ResourceKind, name: impl Into<String>) -> Self {
        Self {
            parent: id.parent(),
            id,
            kind,
            name: name.into(),
            capacity_bps: None,
            state: ResourceState::Available,
            zone: None,
            hops: Vec::new(),
        }
    }
}

/// An inventory that cannot be built: `FILE:LINE: FIELD: MESSAGE`, leaving
/// out what is unknown.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct InventoryError {
    /// File name given by the caller ("" for discovered resources).
    pub file: String,
    /// 1-based line, when known.
    pub line: Option<usize>,
    /// Field path (`resource[2].capacity`), when known.
    pub field: Option<String>,
    /// What is wrong, with the value.
    pub message: String,
}

impl InventoryError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            file: String::new(),
            line: None,
            field: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for InventoryError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.file.is_empty() {
            f.write_str(&self.file)?;
            if let Some(l) = self.line {
                write!(f, ":{l}")?;
            }
            f.write_str(": ")?;
        } else if let Some(l) = self.line {
            write!(f, "line {l}: ")?;
        }
        if let Some(field) = &self.field {
            write!(f, "{field}: ")?;
        }
        f.write_str(&self.message)
    }
}

/// All resources, keyed by id; every parent is present.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inventory {
    resources: BTreeMap<ResourceId, Resource>,
}

/// The IANA zones of the cities in the preset topologies; other cities get
/// no zone (an inventory file can give one).
const CITY_ZONES: [(&str, &str); 11] = [
    ("Geneva", "Europe/Zurich"),
    ("Chicago", "America/Chicago"),
    ("Amsterdam", "Europe/Amsterdam"),
    ("Tokyo", "Asia/Tokyo"),
    ("Seattle", "America/Los_Angeles"),
    ("Sunnyvale", "America/Los_Angeles"),
    ("Los Angeles", "America/Los_Angeles"),
    ("Phoenix", "America/Phoenix"),
    ("Pittsburgh", "America/New_York"),
    ("Kansas City", "America/Chicago"),
    ("Indianapolis", "America/Indiana/Indianapolis"),
];

impl Inventory {
    /// An empty inventory.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one resource. Refused: a duplicate id, a missing parent, a
    /// `parent` field that is not the id's prefix, a child whose capacity
    /// exceeds its parent's, or children whose capacities add up to more
    /// than the parent's (two 1 Gbit/s halves fit a 2.5 Gbit/s circuit; three
    /// do not).
    pub fn insert(&mut self, resource: Resource) -> Result<(), InventoryError> {
        let id = resource.id.clone();
        if self.resources.contains_key(&id) {
            return Err(InventoryError::new(format!("duplicate resource id {id}")));
        }
        if resource.parent != id.parent() {
            return Err(InventoryError::new(format!(
                "parent of {id} must be {:?} (the id's prefix), not {:?}",
                id.parent().map(String::from),
                resource.parent.as_ref().map(ResourceId::as_str)
            )));
        }
        if let Some(p) = id.parent() {
            let Some(parent) = self.resources.get(&p) else {
                return Err(InventoryError::new(format!(
                    "parent {p} of {id} is not in the inventory (declare it first)"
                )));
            };
            if let (Some(pc), Some(c)) = (parent.capacity_bps, resource.capacity_bps) {
                let siblings: u64 = self
                    .children(&p)
                    .iter()
                    .filter_map(|r| r.capacity_bps)
                    .sum();
                if c > pc || siblings + c > pc {
                    return Err(InventoryError::new(format!(
                        "capacity of {id} ({c} bit/s) plus its siblings' ({siblings} bit/s) exceeds \
                         the capacity of {p} ({pc} bit/s)"
                    )));
                }
            }
        }
        if let Some(z) = &resource.zone {
            crate::time::zone(z).map_err(|e| InventoryError::new(e.to_string()))?;
        }
        self.resources.insert(id, resource);
        Ok(())
    }

    /// The resource `id`.
    pub fn get(&self, id: &ResourceId) -> Option<&Resource> {
        self.resources.get(id)
    }

    /// All resources in id order (parents before children).
    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.resources.values()
    }

    /// Number of resources.
    pub fn len(&self) -> usize {
        self.resources.len()
    }

    /// True when there are none.
    pub fn is_empty(&self) -> bool {
        self.resources.is_empty()
    }

    /// The direct children of `id`.
    pub fn children(&self, id: &ResourceId) -> Vec<&Resource> {
        self.resources
            .values()
            .filter(|r| r.parent.as_ref() == Some(id))
            .collect()
    }

    /// The ancestors of `id` present in the inventory, nearest first.
    pub fn ancestors(&self, id: &ResourceId) -> Vec<&Resource> {
        id.self_and_ancestors()
            .iter()
            .skip(1)
            .filter_map(|a| self.resources.get(a))
            .collect()
    }

    /// Every resource below `id`, in id order.
    pub fn descendants(&self, id: &ResourceId) -> Vec<&Resource> {
        self.resources
            .values()
            .filter(|r| r.id != *id && id.is_ancestor_or_self_of(&r.id))
            .collect()
    }

    /// True when `a` and `b` cannot be booked for overlapping times: one is
    /// an ancestor-or-self of the other.
    pub fn conflicts(&self, a: &ResourceId, b: &ResourceId) -> bool {
        a.conflicts_with(b)
    }

    /// The ids a booking of `id` conflicts with: its ancestors, itself and
    /// its descendants.
    pub fn conflict_set(&self, id: &ResourceId) -> Vec<ResourceId> {
        let mut out: Vec<ResourceId> = self.ancestors(id).iter().map(|r| r.id.clone()).collect();
        out.push(id.clone());
        out.extend(self.descendants(id).iter().map(|r| r.id.clone()));
        out
    }

    /// The state a booking of `id` sees: maintenance of the resource or of
    /// any ancestor refuses it; maintenance of a descendant or degradation
    /// anywhere in the conflict set degrades it (the reason names where).
    pub fn effective_state(&self, id: &ResourceId) -> ResourceState {
        let mut degraded = None;
        let mut up = vec![id];
        let ancestors = self.ancestors(id);
        up.extend(ancestors.iter().map(|r| &r.id));
        for rid in up {
            match self.resources.get(rid).map(|r| &r.state) {
                Some(ResourceState::Maintenance { reason }) => {
                    return ResourceState::Maintenance {
                        reason: format!("{rid}: {reason}"),
                    };
                }
                Some(ResourceState::Degraded { reason }) if degraded.is_none() => {
                    degraded = Some(format!("{rid}: {reason}"));
                }
                _ => {}
            }
        }
        for d in self.descendants(id) {
            if degraded.is_some() {
                break;
            }
            match &d.state {
                ResourceState::Maintenance { reason } => {
                    degraded = Some(format!("{} is in maintenance: {reason}", d.id));
                }
                ResourceState::Degraded { reason } => {
                    degraded = Some(format!("{}: {reason}", d.id));
                }
                ResourceState::Available => {}
            }
        }
        match degraded {
            Some(reason) => ResourceState::Degraded { reason },
            None => ResourceState::Available,
        }
    }

    /// The IANA zones of the sites that are ancestors-or-self of `id`.
    pub fn zones(&self, id: &ResourceId) -> Vec<String> {
        id.self_and_ancestors()
            .iter()
            .filter_map(|a| self.resources.get(a)?.zone.clone())
            .collect()
    }

    /// Sets the state of `id` (maintenance, degraded, available again).
    pub fn set_state(
        &mut self,
        id: &ResourceId,
        state: ResourceState,
    ) -> Result<(), InventoryError> {
        let r = self
            .resources
            .get_mut(id)
            .ok_or_else(|| InventoryError::new(format!("unknown resource {id}")))?;
        r.state = state;
        Ok(())
    }

    /// Adds every resource of `other` (parents first). A duplicate id is an
    /// error: the same resource must come from one source only.
    pub fn merge(&mut self, other: Inventory) -> Result<(), InventoryError> {
        for r in other.resources.into_values() {
            self.insert(r)?;
        }
        Ok(())
    }

    /// Discovers resources from topology files: a site per city named by the
    /// sender, the hops and the receiver (with its IANA zone when the city
    /// is known), the sender and receiver hosts under their sites, and one
    /// link per path under the sender's site, carrying its hops and the
    /// bottleneck rate as capacity. A site or host named by several
    /// topologies is one resource.
    pub fn from_topologies(topologies: &[Topology]) -> Result<Self, InventoryError> {
        let mut inv = Self::new();
        let site_of = |city: Option<&String>| -> ResourceId {
            ResourceId(city.map_or_else(|| "emulated".to_owned(), |c| slug(c)))
        };
        for t in topologies {
            let mut cities: Vec<Option<&String>> = vec![t.sender.city.as_ref()];
            cities.extend(t.hops.iter().map(|h| h.city.as_ref()));
            cities.push(t.receiver.city.as_ref());
            for city in &cities {
                let id = site_of(*city);
                if inv.get(&id).is_none() {
                    let mut r = Resource::new(
                        id.clone(),
                        ResourceKind::Site,
                        city.map_or("emulated paths", |c| c.as_str()),
                    );
                    r.zone = city.and_then(|c| {
                        CITY_ZONES
                            .iter()
                            .find(|(n, _)| n == c)
                            .map(|(_, z)| (*z).to_owned())
                    });
                    inv.insert(r)?;
                }
            }
            let sender_site = site_of(t.sender.city.as_ref());
            let hosts = [
                (sender_site.clone(), t.sender.name.clone()),
                (
                    site_of(t.receiver.city.as_ref()),
                    Some(t.receiver.name.clone()),
                ),
            ];
            for (site, name) in hosts {
                let name = name
                    .filter(|n| !n.is_empty())
                    .unwrap_or_else(|| "host".into());
                let id = site.child(&name);
                if inv.get(&id).is_none() {
                    inv.insert(Resource::new(id, ResourceKind::Host, name))?;
                }
            }
            let link_id = sender_site.child(&t.name);
            let mut link =
                Resource::new(link_id.clone(), ResourceKind::Link, t.description.clone());
            if link.name.is_empty() {
                link.name = t.name.clone();
            }
            link.capacity_bps = longhaul_units::parse_rate(&t.rate).ok();
            link.hops = t.hops.iter().map(|h| h.name.clone()).collect();
            inv.insert(link).map_err(|mut e| {
                e.message = format!("topology {}: {}", t.name, e.message);
                e
            })?;
        }
        Ok(inv)
    }

    /// Reads an inventory file (see `docs/testbed.md`); errors name the
    /// file, line and field.
    pub fn from_toml(text: &str, file: &str) -> Result<Self, InventoryError> {
        let mut inv = Self::new();
        inv.extend_from_toml(text, file)?;
        Ok(inv)
    }

    /// Adds the resources of an inventory file to this inventory, so real
    /// equipment can hang under discovered sites. Entries may come in any
    /// order (parents are inserted first); a duplicate of an id already
    /// present (discovered or earlier in the file) is an error at its line.
    pub fn extend_from_toml(&mut self, text: &str, file: &str) -> Result<(), InventoryError> {
        let doc: InventoryFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| line_of_offset(text, s.start));
            InventoryError {
                file: file.to_owned(),
                line,
                field: line.and_then(|l| field_at_line(text, l)),
                message: e.message().trim().to_owned(),
            }
        })?;
        let at = |i: usize, key: &str, message: String| InventoryError {
            file: file.to_owned(),
            line: line_of_entry_key(text, i, key),
            field: Some(format!("resource[{i}].{key}")),
            message,
        };
        let mut parsed = Vec::new();
        for (i, e) in doc.resource.iter().enumerate() {
            let id = ResourceId::parse(&e.id).map_err(|err| at(i, "id", err.message))?;
            let mut r = Resource::new(id, e.kind, e.name.clone().unwrap_or_else(|| e.id.clone()));
            if let Some(c) = &e.capacity {
                r.capacity_bps = Some(
                    longhaul_units::parse_rate(c)
                        .map_err(|err| at(i, "capacity", err.to_string()))?,
                );
            }
            r.state = match (e.state.as_deref().unwrap_or("available"), &e.reason) {
                ("available", None) => ResourceState::Available,
                ("available", Some(_)) => {
                    return Err(at(
                        i,
                        "reason",
                        "a reason is for degraded or maintenance only".into(),
                    ));
                }
                ("degraded", Some(reason)) => ResourceState::Degraded {
                    reason: reason.clone(),
                },
                ("maintenance", Some(reason)) => ResourceState::Maintenance {
                    reason: reason.clone(),
                },
                ("degraded" | "maintenance", None) => {
                    return Err(at(
                        i,
                        "state",
                        "degraded and maintenance need a reason = \"...\"".into(),
                    ));
                }
                (other, _) => {
                    return Err(at(
                        i,
                        "state",
                        format!("unknown state {other:?}: use available, degraded or maintenance"),
                    ));
                }
            };
            if let Some(z) = &e.zone {
                crate::time::zone(z).map_err(|err| at(i, "zone", err.to_string()))?;
                r.zone = Some(z.clone());
            }
            parsed.push((i, r));
        }
        // Parents first: fewer segments first, stable within a depth.
        parsed.sort_by_key(|(_, r)| r.id.as_str().matches('/').count());
        for (i, r) in parsed {
            self.insert(r).map_err(|err| at(i, "id", err.message))?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryFile {
    #[serde(default)]
    resource: Vec<InventoryEntry>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct InventoryEntry {
    id: String,
    kind: ResourceKind,
    name: Option<String>,
    capacity: Option<String>,
    state: Option<String>,
    reason: Option<String>,
    zone: Option<String>,
}

fn line_of_offset(text: &str, offset: usize) -> usize {
    let mut o = offset.min(text.len());
    while !text.is_char_boundary(o) {
        o -= 1;
    }
    text[..o].matches('\n').count() + 1
}

fn is_entry_header(line: &str) -> bool {
    let t = line.split('#').next().unwrap_or("").trim();
    t.starts_with("[[") && t.trim_start_matches("[[").trim_end_matches("]]").trim() == "resource"
}

fn key_of(line: &str) -> Option<&str> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    Some(t.split_once('=')?.0.trim().trim_matches('"'))
}

/// The field path (`resource[2].kind`) written at 1-based `line`.
fn field_at_line(text: &str, line: usize) -> Option<String> {
    let mut entry: Option<usize> = None;
    let mut count = 0usize;
    for (i, l) in text.lines().enumerate().take(line) {
        if is_entry_header(l) {
            entry = Some(count);
            count += 1;
        }
        if i + 1 == line {
            return match (entry, key_of(l)) {
                (Some(e), Some(k)) => Some(format!("resource[{e}].{k}")),
                (Some(e), None) => Some(format!("resource[{e}]")),
                (None, k) => k.map(str::to_owned),
            };
        }
    }
    None
}

/// The 1-based line of `key` in the `entry`-th `[[resource]]` table, else of
/// its header.
fn line_of_entry_key(text: &str, entry: usize, key: &str) -> Option<usize> {
    let mut count = 0usize;
    let mut header = None;
    for (i, l) in text.lines().enumerate() {
        if is_entry_header(l) {
            if header.is_some() {
                break;
            }
            if count == entry {
                header = Some(i + 1);
            }
            count += 1;
        } else if header.is_some() && key_of(l) == Some(key) {
            return Some(i + 1);
        }
    }
    header
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    fn id(s: &str) -> ResourceId {
        ResourceId::parse(s).unwrap()
    }

    /// CERN with the 2.5G StarLight lambda split into two 1G circuits (one degraded) and a host in
    /// maintenance: the inventory the unit tests here, the web crate's and the UI test book on.
    pub(crate) const DATATAG: &str = include_str!("../testdata/datatag.toml");

    pub(crate) fn datatag() -> Inventory {
        Inventory::from_toml(DATATAG, "datatag.toml").unwrap()
    }

    #[test]
    fn ids_are_checked() {
        assert!(ResourceId::parse("cern/starlight-lambda/1g-a").is_ok());
        for bad in ["", "CERN", "a//b", "a/", "-a", "a b", "a/-b"] {
            assert!(ResourceId::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(slug("HP RX2600 (CERN)"), "hp-rx2600-cern");
        assert_eq!(slug("--"), "x");
    }

    #[test]
    fn ancestry_by_prefix_not_by_string_start() {
        assert!(id("a/b").is_ancestor_or_self_of(&id("a/b/c")));
        assert!(id("a/b").is_ancestor_or_self_of(&id("a/b")));
        assert!(!id("a/b").is_ancestor_or_self_of(&id("a/bc")));
        assert!(!id("a/b/c").is_ancestor_or_self_of(&id("a/b")));
    }

    #[test]
    fn parent_and_children_conflict_siblings_do_not() {
        let inv = datatag();
        let lambda = id("cern/starlight-lambda");
        let a = id("cern/starlight-lambda/1g-a");
        let b = id("cern/starlight-lambda/1g-b");
        assert!(inv.conflicts(&lambda, &a));
        assert!(inv.conflicts(&a, &lambda));
        assert!(inv.conflicts(&id("cern"), &b));
        assert!(inv.conflicts(&a, &a));
        assert!(!inv.conflicts(&a, &b));
        assert!(!inv.conflicts(&id("cern/host-1"), &a));
        let anc: Vec<_> = inv.ancestors(&a).iter().map(|r| r.id.as_str()).collect();
        assert_eq!(anc, ["cern/starlight-lambda", "cern"]);
        let desc: Vec<_> = inv
            .descendants(&lambda)
            .iter()
            .map(|r| r.id.as_str())
            .collect();
        assert_eq!(
            desc,
            ["cern/starlight-lambda/1g-a", "cern/starlight-lambda/1g-b"]
        );
        assert_eq!(inv.conflict_set(&a).len(), 3);
        assert_eq!(inv.zones(&a), ["Europe/Zurich"]);
    }

    #[test]
    fn effective_state_follows_the_hierarchy() {
        let mut inv = datatag();
        let lambda = id("cern/starlight-lambda");
        let a = id("cern/starlight-lambda/1g-a");
        assert_eq!(inv.effective_state(&a), ResourceState::Available);
        assert!(
            matches!(inv.effective_state(&lambda), ResourceState::Degraded { reason } if reason.contains("1g-b"))
        );
        assert!(matches!(
            inv.effective_state(&id("cern")),
            ResourceState::Degraded { .. }
        ));
        inv.set_state(
            &lambda,
            ResourceState::Maintenance {
                reason: "fibre cut".into(),
            },
        )
        .unwrap();
        assert!(
            matches!(inv.effective_state(&a), ResourceState::Maintenance { reason } if reason.contains("fibre cut"))
        );
    }

    #[test]
    fn capacity_of_children_must_fit_the_parent() {
        let mut inv = datatag();
        let mut c = Resource::new(
            id("cern/starlight-lambda/1g-c"),
            ResourceKind::Circuit,
            "third",
        );
        c.capacity_bps = Some(1_000_000_000);
        let err = inv.insert(c).unwrap_err();
        assert!(err.message.contains("exceeds"), "{err}");
        let mut half = Resource::new(id("cern/starlight-lambda/500m"), ResourceKind::Circuit, "x");
        half.capacity_bps = Some(500_000_000);
        inv.insert(half).unwrap();
    }

    #[test]
    fn file_errors_name_file_line_and_field() {
        let text = "[[resource]]\nid = \"cern\"\nkind = \"site\"\n\n[[resource]]\nid = \"cern/x\"\nkind = \"lambda\"\ncapacity = \"fast\"\n";
        let err = Inventory::from_toml(text, "inv.toml").unwrap_err();
        assert_eq!(err.line, Some(8));
        assert_eq!(err.field.as_deref(), Some("resource[1].capacity"));
        assert!(
            err.to_string()
                .starts_with("inv.toml:8: resource[1].capacity: "),
            "{err}"
        );

        let text = "[[resource]]\nid = \"cern\"\nkind = \"planet\"\n";
        let err = Inventory::from_toml(text, "inv.toml").unwrap_err();
        assert_eq!(err.line, Some(3), "{err}");
        assert_eq!(err.field.as_deref(), Some("resource[0].kind"));

        let text = "[[resource]]\nid = \"cern/x\"\nkind = \"host\"\n";
        let err = Inventory::from_toml(text, "inv.toml").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(err.message.contains("parent cern"), "{err}");

        let text = "[[resource]]\nid = \"a\"\nkind = \"site\"\nstate = \"maintenance\"\n";
        let err = Inventory::from_toml(text, "f").unwrap_err();
        assert_eq!(
            (err.line, err.field.as_deref()),
            (Some(4), Some("resource[0].state"))
        );

        let text = "[[resource]]\nid = \"a\"\nkind = \"site\"\nzone = \"Europe/Geneva\"\n";
        let err = Inventory::from_toml(text, "f").unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");

        let text = "[[resource]]\nid = \"a\"\nkind = \"site\"\ncolour = \"red\"\n";
        let err = Inventory::from_toml(text, "f").unwrap_err();
        assert_eq!(err.line, Some(4), "{err}");
    }

    #[test]
    fn duplicates_are_refused_in_a_file_and_on_merge() {
        let text = "[[resource]]\nid = \"a\"\nkind = \"site\"\n[[resource]]\nid = \"a\"\nkind = \"site\"\n";
        let err = Inventory::from_toml(text, "f").unwrap_err();
        assert_eq!(err.line, Some(5), "{err}");
        assert!(err.message.contains("duplicate"));

        let presets: Vec<_> = longhaul_topology::presets()
            .iter()
            .map(|p| p.topology().unwrap())
            .collect();
        let mut inv = Inventory::from_topologies(&presets).unwrap();
        let dup =
            Inventory::from_toml("[[resource]]\nid = \"geneva\"\nkind = \"site\"\n", "f").unwrap();
        assert!(
            inv.merge(dup)
                .unwrap_err()
                .message
                .contains("duplicate resource id geneva")
        );
        // Real equipment hangs under a discovered site.
        inv.extend_from_toml(
            "[[resource]]\nid = \"geneva/lambda\"\nkind = \"lambda\"\ncapacity = \"2.5G\"\n",
            "real.toml",
        )
        .unwrap();
        assert_eq!(
            inv.get(&id("geneva/lambda")).unwrap().capacity_bps,
            Some(2_500_000_000)
        );
    }

    #[test]
    fn discovery_from_the_presets() {
        let presets: Vec<_> = longhaul_topology::presets()
            .iter()
            .map(|p| p.topology().unwrap())
            .collect();
        let inv = Inventory::from_topologies(&presets).unwrap();
        let geneva = inv.get(&id("geneva")).unwrap();
        assert_eq!(geneva.kind, ResourceKind::Site);
        assert_eq!(geneva.zone.as_deref(), Some("Europe/Zurich"));
        assert_eq!(
            inv.get(&id("chicago")).unwrap().zone.as_deref(),
            Some("America/Chicago")
        );
        let link = inv.get(&id("geneva/cern-starlight")).unwrap();
        assert_eq!(link.kind, ResourceKind::Link);
        assert_eq!(link.capacity_bps, Some(1_000_000_000));
        assert_eq!(link.hops, ["Juniper T320 Geneva", "Juniper T320 Chicago"]);
        assert!(inv.get(&id("geneva/cern-host")).is_some());
        assert!(inv.get(&id("chicago/starlight-host")).is_some());
        assert!(inv.get(&id("phoenix")).is_some());
        // Every preset gives a link.
        assert_eq!(
            inv.iter().filter(|r| r.kind == ResourceKind::Link).count(),
            presets.len()
        );
        // Booking the Geneva site conflicts with every path leaving it.
        assert!(inv.conflicts(&id("geneva"), &link.id));
        // Same topology twice: the link is a duplicate.
        let twice = [presets[0].clone(), presets[0].clone()];
        assert!(Inventory::from_topologies(&twice).is_err());
    }

    #[test]
    fn resource_serde_round_trip() {
        let inv = datatag();
        let json = serde_json::to_string(&inv).unwrap();
        let back: Inventory = serde_json::from_str(&json).unwrap();
        assert_eq!(back, inv);
        let r = inv.get(&id("cern/host-1")).unwrap();
        let v = serde_json::to_value(r).unwrap();
        assert_eq!(v["state"], "maintenance");
        assert_eq!(v["reason"], "disk swap");
    }
}
