/* The gRPC status code names (see grpc_codes.h). Pure data; used in every process. */
#include "grpc_codes.h"

static const char *const names[GRPC_CODES_COUNT] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
};

const char *grpc_code_name(int code)
{
	return code >= 0 && code < GRPC_CODES_COUNT ? names[code] : 0;
}
