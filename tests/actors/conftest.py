"""Fixtures of the Kafka-client tests here (test_kafka_security_*.py, test_kafka_clients_inproc.py),
from kafka_security.py."""

from .kafka_security import files, free_clients, sasl_plaintext  # noqa: F401 (fixtures)
