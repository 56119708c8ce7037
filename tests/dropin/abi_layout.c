/*
 * abi_layout.c: prints, one per line as "NAME VALUE", every constant of <librpma.h> (each
 * RPMA_* macro and enum constant) and the size, alignment and member offsets of each type a
 * program shares with the library. header_test.sh compiles it once against softrpma's header
 * and once against the distro's and diffs the two outputs: they must be identical.
 * header_test.sh also checks that every RPMA_* name of either header is printed here.
 */
#include <librpma.h>

#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define VALUE(name) printf("%s %lld\n", #name, (long long)(name))
#define POINTER(name) printf("%s %lld\n", #name, (long long)(intptr_t)(name))
#define TYPE(type) printf("sizeof(" #type ") %zu alignof %zu\n", sizeof(type), alignof(type))
#define MEMBER(type, member)                                                      \
	printf("offsetof(" #type ", " #member ") %zu sizeof %zu\n", offsetof(type, member), \
	       sizeof(((type *)0)->member))

int main(void)
{
	/* Macros. */
	VALUE(RPMA_W_WAIT_FOR_COMPLETION);
	VALUE(RPMA_E_UNKNOWN);
	VALUE(RPMA_E_NOSUPP);
	VALUE(RPMA_E_PROVIDER);
	VALUE(RPMA_E_NOMEM);
	VALUE(RPMA_E_INVAL);
	VALUE(RPMA_E_NO_COMPLETION);
	VALUE(RPMA_E_NO_EVENT);
	VALUE(RPMA_E_AGAIN);
	VALUE(RPMA_E_SHARED_CHANNEL);
	VALUE(RPMA_E_NOT_SHARED_CHNL);
	VALUE(RPMA_DEFAULT_TIMEOUT_MS);
	VALUE(RPMA_MR_USAGE_READ_SRC);
	VALUE(RPMA_MR_USAGE_READ_DST);
	VALUE(RPMA_MR_USAGE_WRITE_SRC);
	VALUE(RPMA_MR_USAGE_WRITE_DST);
	VALUE(RPMA_MR_USAGE_FLUSH_TYPE_VISIBILITY);
	VALUE(RPMA_MR_USAGE_FLUSH_TYPE_PERSISTENT);
	VALUE(RPMA_MR_USAGE_SEND);
	VALUE(RPMA_MR_USAGE_RECV);
	VALUE(RPMA_F_COMPLETION_ON_ERROR);
	VALUE(RPMA_F_COMPLETION_ALWAYS);
	VALUE(RPMA_ATOMIC_WRITE_ALIGNMENT);
	POINTER(RPMA_LOG_USE_DEFAULT_FUNCTION);

	/* Enum constants. */
	VALUE(RPMA_UTIL_IBV_CONTEXT_LOCAL);
	VALUE(RPMA_UTIL_IBV_CONTEXT_REMOTE);
	VALUE(RPMA_CONN_UNDEFINED);
	VALUE(RPMA_CONN_ESTABLISHED);
	VALUE(RPMA_CONN_CLOSED);
	VALUE(RPMA_CONN_LOST);
	VALUE(RPMA_CONN_REJECTED);
	VALUE(RPMA_CONN_UNREACHABLE);
	VALUE(RPMA_FLUSH_TYPE_PERSISTENT);
	VALUE(RPMA_FLUSH_TYPE_VISIBILITY);
	VALUE(RPMA_LOG_DISABLED);
	VALUE(RPMA_LOG_LEVEL_FATAL);
	VALUE(RPMA_LOG_LEVEL_ERROR);
	VALUE(RPMA_LOG_LEVEL_WARNING);
	VALUE(RPMA_LOG_LEVEL_NOTICE);
	VALUE(RPMA_LOG_LEVEL_INFO);
	VALUE(RPMA_LOG_LEVEL_DEBUG);
	VALUE(RPMA_LOG_THRESHOLD);
	VALUE(RPMA_LOG_THRESHOLD_AUX);
	VALUE(RPMA_LOG_THRESHOLD_MAX);

	/* Types with a layout or a size the caller allocates. */
	TYPE(struct rpma_conn_private_data);
	MEMBER(struct rpma_conn_private_data, ptr);
	MEMBER(struct rpma_conn_private_data, len);
	TYPE(enum rpma_util_ibv_context_type);
	TYPE(enum rpma_conn_event);
	TYPE(enum rpma_flush_type);
	TYPE(enum rpma_log_level);
	TYPE(enum rpma_log_threshold);
	TYPE(rpma_log_function *);
	return 0;
}
