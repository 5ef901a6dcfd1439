"""Who a TLS client is: the subject of its certificate, as Kafka names it.

Kafka takes the peer certificate's subject as Java's `X500Principal.getName()` prints it
(RFC 2253: most specific RDN first, keywords CN, C, L, ST, O, OU, STREET, DC, UID, any other
attribute as `<oid>=#<hex of its DER value>`, and `,=+<>#;"\\` escaped), maps it with
`ssl.principal.mapping.rules` (SslPrincipalMapper) and gives `User:<name>`. A client without
a certificate is `User:ANONYMOUS`.

Rules are tried in order; the first that matches the whole DN gives the name:

    RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT

`RULE:<pattern>/<replacement>/[L|U]` (L or U changes the case), `DEFAULT` the DN as it is.
A DN no rule matches fails the connection. Patterns are Java regexes run by Python's `re`:
the common syntax is the same and Java's named groups `(?<n>...)` are translated; a
construct only Java knows (`\\p{Lu}`) is refused when the rules are read. Replacements
follow Java's `$n`, `${n}` and `\\` rules.
"""
from __future__ import annotations

import re

from cryptography import x509

from clients.protocol.acl import ANONYMOUS

__all__ = ["SslPrincipalMapper", "SslPrincipalBuilder", "NoMatchingRule", "subject_dn",
           "DEFAULT_RULES"]

DEFAULT_RULES = "DEFAULT"

# Java's RFC 2253 keywords (sun.security.x509.AVAKeyword, rfc2253Compliant), by OID.
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST",
             "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.9": "STREET",
             "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID"}
# The DER string types Java prints as text (AVA.isDerString): UTF8String, PrintableString,
# T61String, IA5String, GeneralString, BMPString.
_TEXT_TAGS = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED = set(',=+<>#;"\\')


class NoMatchingRule(Exception):
    """No `ssl.principal.mapping.rules` rule matches a certificate's DN."""


def _tlv(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at `pos`."""
    tag, length = data[pos], data[pos + 1]
    pos += 2
    if length & 0x80:
        n = length & 0x7F
        length = int.from_bytes(data[pos:pos + n], "big")
        pos += n
    return tag, pos, pos + length


def _value_der(attribute: x509.NameAttribute) -> bytes:
    """The DER of an attribute's value (its tag and bytes, as the certificate holds them)."""
    der = x509.Name([x509.RelativeDistinguishedName([attribute])]).public_bytes()
    _, pos, _ = _tlv(der, 0)             # RDNSequence
    _, pos, _ = _tlv(der, pos)           # RelativeDistinguishedName (SET)
    _, pos, _ = _tlv(der, pos)           # AttributeTypeAndValue (SEQUENCE)
    _, _, pos = _tlv(der, pos)           # skip the OID
    _, _, end = _tlv(der, pos)
    return der[pos:end]


def _escape(value: str) -> str:
    out = "".join("\\" + c if c in _ESCAPED else "\\00" if c == "\0" else c for c in value)
    lead = len(out) - len(out.lstrip(" \r"))
    trail = len(out) - len(out.rstrip(" \r"))
    if lead == len(out):
        return "".join("\\" + c for c in out)
    return ("".join("\\" + c for c in out[:lead]) + out[lead:len(out) - trail]
            + "".join("\\" + c for c in out[len(out) - trail:]))


def _attribute(attribute: x509.NameAttribute) -> str:
    oid = attribute.oid.dotted_string
    keyword = _KEYWORDS.get(oid)
    if keyword is not None and isinstance(attribute.value, str):
        der = _value_der(attribute)
        if der[0] in _TEXT_TAGS:
            return f"{keyword}={_escape(attribute.value)}"
    return f"{keyword or oid}=#{_value_der(attribute).hex()}"


def subject_dn(der_certificate: bytes) -> str:
    """The certificate's subject as Java's X500Principal.getName() (RFC 2253) prints it."""
    cert = x509.load_der_x509_certificate(der_certificate)
    return ",".join("+".join(_attribute(a) for a in rdn)
                    for rdn in reversed(cert.subject.rdns))


# Kafka's SslPrincipalMapper grammar, unchanged: a rule is DEFAULT, RULE:pattern/replacement/
# with an optional L or U, or anything else (an error unless empty).
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
# Java's named group `(?<name>...)` is Python's `(?P<name>...)`; lookbehinds stay.
_JAVA_NAMED_GROUP = re.compile(r"(?<!\\)\(\?<(?![=!])")


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "", case: str = ""):
        self.is_default = pattern is None
        self.source = pattern or ""
        self.replacement = replacement
        self.case = case
        try:
            self.pattern = re.compile(_JAVA_NAMED_GROUP.sub("(?P<", self.source))
        except re.error as e:
            raise ValueError(f"Invalid rule pattern {self.source!r}: {e}") from None

    def apply(self, dn: str) -> str | None:
        if self.is_default:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        name = self.pattern.sub(self._expand, dn)
        if self.case == "L":
            return name.lower()
        if self.case == "U":
            return name.upper()
        return name

    def _expand(self, m: re.Match[str]) -> str:
        """Java's Matcher.appendReplacement, with Kafka's twist: a `$n` naming a group the
        pattern lacks stays literal text."""
        rep, groups = self.replacement, self.pattern.groups
        out: list[str] = []
        i = 0
        while i < len(rep):
            c = rep[i]
            if c == "\\":
                if i + 1 >= len(rep):
                    raise ValueError("character to be escaped is missing")
                out.append(rep[i + 1])
                i += 2
            elif c == "$":
                i += 1
                if i < len(rep) and rep[i] == "{":
                    end = rep.find("}", i)
                    try:
                        out.append(m.group(rep[i + 1:end]) or "")
                    except IndexError:
                        end = -1
                    if end < 0:
                        raise ValueError(f"Illegal named group reference in {rep!r}")
                    i = end + 1
                    continue
                if i >= len(rep) or not rep[i].isdigit():
                    raise ValueError("Illegal group reference in replacement " + repr(rep))
                start, ref = i, int(rep[i])
                i += 1
                while i < len(rep) and rep[i].isdigit() and ref * 10 + int(rep[i]) <= groups:
                    ref = ref * 10 + int(rep[i])
                    i += 1
                if ref > groups:
                    if groups == 0:      # Kafka leaves these to Java, which refuses them
                        raise ValueError(f"No group {ref} in {self.source!r}")
                    out.append("$" + rep[start:i])
                else:
                    out.append(m.group(ref) or "")
            else:
                out.append(c)
                i += 1
        return "".join(out)

    def __str__(self) -> str:
        if self.is_default:
            return "DEFAULT"
        return (f"RULE:{self.source}/{self.replacement}"
                + {"L": "/L", "U": "/U"}.get(self.case, ""))


class SslPrincipalMapper:
    """`ssl.principal.mapping.rules` (Kafka's SslPrincipalMapper). ValueError for rules
    Kafka refuses."""

    def __init__(self, rules: str | None = DEFAULT_RULES):
        parsed = (_parse_rule(r) for r in _split_rules(DEFAULT_RULES if rules is None else rules))
        self._rules = [r for r in parsed if r is not None]

    def name(self, dn: str) -> str:
        """The principal name of a DN: the first matching rule's; NoMatchingRule if none."""
        for rule in self._rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules {self._describe()}")

    def _describe(self) -> str:
        return "[" + ", ".join(str(r) for r in self._rules) + "]"

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = {self._describe()})"


def _split_rules(rules: str) -> list[str]:
    return [m.group(1) for m in _RULE_SPLITTER.finditer(rules.strip())]


def _parse_rule(rule: str) -> _Rule | None:
    m = _RULE_PARSER.match(rule)
    if m is None:
        raise ValueError(f"Invalid rule: {rule}")
    if m.end() != len(rule):
        raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: `{rule[m.end():]}`")
    if m.group(1) is not None:
        return _Rule()
    if m.group(2) is not None:
        return _Rule(m.group(2), m.group(4), m.group(6))
    return None       # an empty rule


class SslPrincipalBuilder:
    """The principal of a TLS connection from its peer certificate (DER, or None when the
    client sent none). Kafka's DefaultKafkaPrincipalBuilder for SSL."""

    def __init__(self, mapping_rules: str | None = DEFAULT_RULES):
        self.mapper = SslPrincipalMapper(mapping_rules)

    def __call__(self, der_certificate: bytes | None) -> str:
        """"User:<name>"; NoMatchingRule when no rule maps the certificate's DN."""
        if der_certificate is None:
            return ANONYMOUS
        dn = subject_dn(der_certificate)
        try:
            return "User:" + self.mapper.name(dn)
        except NoMatchingRule as e:
            raise NoMatchingRule(f"Failed to map name for '{dn}' based on SSL principal "
                                 f"mapping rules: {e}") from None
