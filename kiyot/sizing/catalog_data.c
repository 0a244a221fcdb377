/*
 * catalog_data.c: the instance catalog JSON and the Spot Instance Advisor table
 * (data/aws-spot-advisor.json), embedded in the binary with the assembler's .incbin. The path is relative to the repository root, where make runs the compiler. A NUL
 * follows the data so it can be used as a C string.
 *
 * The build must rebuild this object when a JSON file changes (the compiler's -MMD does not
 * see .incbin), so kiyot/module.mk lists both as prerequisites of this object.
 */
#include "catalog.h"
#include "catalog_advisor.h"

__asm__(".pushsection .rodata,\"a\"\n"
	".balign 16\n"
	".type kiyot_catalog_data_start, @object\n"
	"kiyot_catalog_data_start:\n"
	".incbin \"kiyot/sizing/data/aws-instance-catalog.json\"\n"
	"kiyot_catalog_data_end:\n"
	".byte 0\n"
	".balign 16\n"
	".type kiyot_advisor_data_start, @object\n"
	"kiyot_advisor_data_start:\n"
	".incbin \"kiyot/sizing/data/aws-spot-advisor.json\"\n"
	"kiyot_advisor_data_end:\n"
	".byte 0\n"
	".popsection\n");

/* Returns the embedded catalog text and its length (without the NUL). */
const char *catalog_embedded(size_t *len)
{
	extern const char kiyot_catalog_data_start[], kiyot_catalog_data_end[];

	*len = (size_t)(kiyot_catalog_data_end - kiyot_catalog_data_start);
	return kiyot_catalog_data_start;
}

/* Returns the embedded Spot Instance Advisor table and its length (without the NUL). */
const char *catalog_advisor_embedded(size_t *len)
{
	extern const char kiyot_advisor_data_start[], kiyot_advisor_data_end[];

	*len = (size_t)(kiyot_advisor_data_end - kiyot_advisor_data_start);
	return kiyot_advisor_data_start;
}
