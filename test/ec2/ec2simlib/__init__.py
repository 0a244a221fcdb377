"""ec2sim: a local endpoint speaking the EC2 Query protocol (API version 2016-11-15) for tests.

Modules: main (command line), config (settings), server (HTTP and dispatch), sigv4 (signature
check), params (request parameters), xmlout (XML answers), errors (EC2 error codes), actions
(the EC2 actions), state (instances and filters), lifecycle (boot and terminate), cells (the
external cell commands), catalog (instance types and prices), throttle (token buckets), faults
(injected errors), admin (the /_admin/ JSON API).
"""

API_VERSION = "2016-11-15"
XML_NAMESPACE = "http://ec2.amazonaws.com/doc/2016-11-15/"
