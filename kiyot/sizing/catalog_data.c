/*
 * catalog_data.c: the instance catalog JSON, embedded in the binary with the assembler's
 * .incbin. The path is relative to the repository root, where make runs the compiler. A NUL
 * follows the data so it can be used as a C string.
 *
 * The build must rebuild this object when the JSON file changes (the compiler's -MMD does not
 * see .incbin), so kiyot/module.mk should list the file as a prerequisite of this object.
 */
#include "catalog.h"

__asm__(".pushsection .rodata,\"a\"\n"
	".balign 16\n"
	".type kiyot_catalog_data_start, @object\n"
	"kiyot_catalog_data_start:\n"
	".incbin \"kiyot/sizing/data/aws-instance-catalog.json\"\n"
	"kiyot_catalog_data_end:\n"
	".byte 0\n"
	".popsection\n");

/* Returns the embedded catalog text and its length (without the NUL). */
const char *catalog_embedded(size_t *len)
{
	extern const char kiyot_catalog_data_start[], kiyot_catalog_data_end[];

	*len = (size_t)(kiyot_catalog_data_end - kiyot_catalog_data_start);
	return kiyot_catalog_data_start;
}
