"""Security: who a connection is (SASL PLAIN and SCRAM, TLS client certificates) and what
that principal may do (the ACL authorizer). See docs/SECURITY.md."""
