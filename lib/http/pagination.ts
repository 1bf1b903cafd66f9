import Joi from 'joi';

export interface Page {
    page: number;
    pageSize: number;
}

export interface PageResult<T> {
    items: T[];
    total: number;
    page: number;
    pageSize: number;
    totalPages: number;
}

export const pageQuery = {
    page: Joi.number().integer().min(1).max(1_000_000).default(1).description('Page number, from 1'),
    pageSize: Joi.number().integer().min(1).max(100).default(25).description('Items per page, 1 to 100')
};

export const pageOf = (item: Joi.Schema, label: string) => Joi.object({
    items: Joi.array().items(item).required(),
    total: Joi.number().integer().required(),
    page: Joi.number().integer().required(),
    pageSize: Joi.number().integer().required(),
    totalPages: Joi.number().integer().required()
}).label(label);

export const pageResult = <T>(items: T[], total: number, page: Page): PageResult<T> => ({
    items,
    total,
    page: page.page,
    pageSize: page.pageSize,
    totalPages: Math.ceil(total / page.pageSize)
});

/** Pages an in-memory list (configuration kinds, which are few per tenant). */
export const paginate = <T>(all: T[], page: Page): PageResult<T> =>
    pageResult(all.slice((page.page - 1) * page.pageSize, page.page * page.pageSize), all.length, page);
