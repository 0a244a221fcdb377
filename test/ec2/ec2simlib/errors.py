"""EC2 error codes and the HTTP statuses EC2 answers them with."""

# Client errors answer 400 unless listed here. InsufficientInstanceCapacity is in the
# "server errors" table of the EC2 API reference and comes back as 500 on the wire;
# RequestLimitExceeded comes back as 503.
_STATUS = {
    "AuthFailure": 401,
    "UnauthorizedOperation": 403,
    "DryRunOperation": 412,
    "InsufficientInstanceCapacity": 500,
    "InsufficientHostCapacity": 500,
    "InternalError": 500,
    "Unavailable": 503,
    "RequestLimitExceeded": 503,
}


def status_for(code):
    """The HTTP status EC2 uses for an error code."""
    return _STATUS.get(code, 400)


class Ec2Error(Exception):
    """An error answered to the client in EC2's error shape."""

    def __init__(self, code, message, status=None):
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.status = status if status is not None else status_for(code)
