/*
 * Names of the gRPC status codes, by number ("NOT_FOUND" for 5): the CSI spec
 * speaks in these, and rpcd's logs and the CSI client tools print them.
 */
#ifndef SEPCSI_GRPC_CODES_H
#define SEPCSI_GRPC_CODES_H

#define GRPC_CODES_COUNT 17 /* OK (0) .. UNAUTHENTICATED (16) */

/* The name of code, or NULL when code is not a gRPC status code. */
const char *grpc_code_name(int code);

#endif
