"""The reference PII detect-and-redact pipeline that pipeops ships and watches."""
