//! Allowlist patterns: exact domains, `*.domain` wildcards, CIDRs, `host:port`. Pure.
